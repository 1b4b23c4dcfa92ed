"""Differential-testing and conformance suite for PyTorch's sparse and masked semantics.

Pipeline: ``specs/*.yaml`` --(spec)--> Case x backend x device x dtype --(backends)-->
outputs --(compare)--> outcome --(plugin)--> pytest report.

``Unsupported`` is public: a candidate raises it for an input its library cannot express, and the
harness reports that example as unsupported instead of as a failure.
"""

from conformance.types import Unsupported

__version__ = "0.1.0"
__all__ = ["Unsupported", "__version__"]
