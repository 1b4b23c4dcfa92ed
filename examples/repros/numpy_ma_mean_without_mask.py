"""numpy.ma's ``mean`` of an array with no masked entry stored as ``nomask`` (no mask given, or a
scalar mask such as ``~np.array(True)``, which is ``np.False_``) divides the sum by the count with
MaskedArray's domain-checked division, which masks any quotient whose dividend is huge relative
to the divisor: the mean of [inf] is ``masked`` (NaN when filled), of [1e308] too, and in float16
the mean of inf is 1.0. With the same values and an explicit all-False mask array the mean is inf.
A masked mean written as ``np.ma.masked_array(values, mask=~mask).mean()`` gets this for 0-d inputs,
which the generated masked_mean-agrees-with-reference property draws.
"""

import warnings

import numpy as np

warnings.simplefilter("ignore")  # numpy.ma warns about the masked division it does
print(f"numpy {np.__version__}")
for dtype in (np.float16, np.float64):
    for value in (np.inf, -np.inf, 1e308):
        data = np.array(value).astype(dtype)
        nomask = np.ma.masked_array(data, mask=~np.array(True)).mean()
        explicit = np.ma.masked_array(data.reshape(1), mask=np.array([False])).mean()
        print(f"{np.dtype(dtype).name:8s} mean of {float(data)!r:7s}: nomask -> {nomask!r:18s}  "
              f"mask=[False] -> {explicit!r}")
print(f"float64  np.ma.masked_array([np.inf]).mean() -> {np.ma.masked_array([np.inf]).mean()!r}")
