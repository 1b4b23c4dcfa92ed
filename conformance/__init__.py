"""Differential-testing and conformance suite for PyTorch's sparse and masked semantics.

Pipeline: ``specs/*.yaml`` --(spec)--> Case x backend x device x dtype --(backends)-->
outputs --(compare)--> outcome --(plugin)--> pytest report.
"""

__version__ = "0.1.0"
