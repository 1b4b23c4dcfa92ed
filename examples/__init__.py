"""Shipped examples: candidate adapters for real outside implementations (``examples/candidates``),
the tests that pin their verdicts (``examples/tests``, run by ``nox -s examples``) and standalone
repros of the divergences they show (``examples/repros``)."""
