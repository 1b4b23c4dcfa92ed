"""The pytest entry point (``pytest11: conformance``), loaded by every pytest run of an environment
that has the suite installed. It registers the suite's options (:mod:`conformance.run.options`,
which imports neither torch nor Hypothesis nor the op records); that module registers the plugin
itself (:mod:`conformance.run.plugin`; the module map is in docs/architecture.md) only in a run
that opts in (:func:`conformance.run.options.is_conformance_run`). A project's own test runs in
that environment load the options and nothing more.

PYTEST_DONT_REWRITE: a pytest plugin without test assertions, imported before pytest registers it.
"""

pytest_plugins = ["conformance.run.options"]
