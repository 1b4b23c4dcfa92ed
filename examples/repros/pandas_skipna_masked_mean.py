"""pandas' ``Series.where(mask).mean()`` -- the usual pandas masked mean -- skips a NaN at a *valid*
entry (``skipna=True`` is the default), where the documented masked mean (torch.masked.mean,
NumPy's mean over the valid entries) propagates it: [nan, 1] with both entries valid averages to
1.0, not NaN (specs/masked_mean.yaml::nan-at-a-valid-entry). The entries it skipped are not
counted either, so this is neither a mean over the mask nor a NaN.
"""

import numpy as np
import pandas as pd
import torch

values = np.array([np.nan, 1.0])
mask = np.array([True, True])
print(f"pandas {pd.__version__}: Series(values).where(mask).mean()          = "
      f"{pd.Series(values).where(mask).mean()}")
print(f"pandas {pd.__version__}: ... .mean(skipna=False)                   = "
      f"{pd.Series(values).where(mask).mean(skipna=False)}")
print(f"numpy:  values[mask].mean()                                = {values[mask].mean()}")
print(f"torch {torch.__version__}: torch.masked.mean(values, mask=mask) = "
      f"{torch.masked.mean(torch.from_numpy(values), mask=torch.from_numpy(mask)).item()}")
