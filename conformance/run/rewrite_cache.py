"""Let pytest keep the bytecode of the modules it rewrites, where ``PYTHONDONTWRITEBYTECODE`` is set.

pytest rewrites the asserts of every module of a distribution that registers a plugin (this package
and Hypothesis, about 210 modules) and of the tests, in every process it starts: the run, each xdist
worker, each ``check`` a test starts. It caches what it rewrote as ``*-pytest-*.pyc`` beside the
source, unless ``sys.dont_write_bytecode`` is set; then every process parses and rewrites them all
again: 5.5 s of the 12 s a ``--collect-only`` of the harness's tests took on the 2-core VM, 6.7 s
with the cache. pyproject.toml's ``addopts`` loads this module with ``-p``, which pytest imports
before the plugins it finds by entry point, so they are rewritten with the cache on. It changes
nothing where bytecode is written anyway, and the runs ``check`` and ``replay`` start do not load it:
they pass ``--assert=plain`` (no spec item asserts).
"""

import sys

sys.dont_write_bytecode = False
