"""The pytest entry point (``pytest11: conformance``). The plugin lives in :mod:`conformance.run`:
options, collection and items in ``run/plugin.py``, results files and timeouts in ``run/hooks.py``,
generated (Hypothesis) items in ``run/generated_plugin.py``; ``--conformance-item`` (exactly one
item: ``python -m conformance replay``) and each record's re-run command in ``replay.py``."""

pytest_plugins = ["conformance.run.plugin", "conformance.replay"]
