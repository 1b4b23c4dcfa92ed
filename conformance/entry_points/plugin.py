"""The pytest entry point (``pytest11: conformance``). The plugin lives in :mod:`conformance.run`
(the module map is in docs/architecture.md); ``--conformance-item`` and each record's re-run
command are :mod:`conformance.run.rerun`'s.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

pytest_plugins = ["conformance.run.plugin", "conformance.run.rerun"]
