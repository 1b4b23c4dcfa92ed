"""Differential-testing and conformance suite for PyTorch's sparse and masked semantics.

Pipeline: ``specs/*.yaml`` --(spec)--> Case x backend x device x dtype --(backends)-->
outputs --(compare)--> outcome --(plugin)--> pytest report.

``Unsupported`` is public: a candidate raises it for an input its library cannot express, and the
harness reports that example as unsupported instead of as a failure.
"""

__version__ = "0.1.0"
__all__ = ["Unsupported", "__version__"]


def __getattr__(name: str):
    """``conformance.Unsupported``, imported when first asked for: ``python -m conformance`` parses
    its command line (and reports a usage error) before torch, which ``conformance.core.types`` imports,
    is loaded."""
    if name == "Unsupported":
        from conformance.core.types import Unsupported  # lazy: it imports torch (see above)

        return Unsupported
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
