"""Top-level pytest configuration. The conformance plugin itself is registered through the
``pytest11`` entry point of the installed package (``pip install -e .``); this file only
enables pytester for the harness's own tests in tests/."""

pytest_plugins = ("pytester",)
