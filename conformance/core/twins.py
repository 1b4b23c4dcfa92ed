"""The names of the twin properties: the generated properties that judge one of torch's own code paths
against torch's own step on the same inputs, each declared by the paths it judges
(``conformance.ops.base.TorchPath.twins``) and named by the divergences registered against it."""

from __future__ import annotations

PATHS_AGREE = "paths-agree"  # a path (foreach, fused) against torch's for-loop step on the same trajectories
GRAD_SCALING = "grad-scaling"  # a path's handling of torch.amp.GradScaler's grad_scale and found_inf
COMPILED_AGREES = "compiled-agrees"  # the step under torch.compile against the same step run eagerly
TWIN_PROPERTIES = (PATHS_AGREE, GRAD_SCALING, COMPILED_AGREES)
