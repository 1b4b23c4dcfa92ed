"""jax.experimental.sparse.BCOO.sum_duplicates accumulates float16/bfloat16 duplicates in half
precision, as torch's coalesce does (pytorch/pytorch#84471): 4096 ones at one index sum to 2048 in
float16 and 256 in bfloat16 instead of 4096 (specs/coalesce.yaml::many-duplicates-half-precision).

Its sums match adding the duplicates one by one in the order given, rounding after each addition, so
short sums are off too: the 8 float16 values below sum to -7.695068359375, correctly rounded
-7.6953125; BCOO gives -7.71875 (3 ulps off). The generated property coalesce-rounds-correctly
finds such sums; torch's coalesce, which also accumulates in half precision, summed the same
entries of a longer tensor in another order (-7.7265625), so the three-way verdict on that item is
"failed" (candidate differs from stock torch), not "same as torch".
"""

import jax.numpy as jnp
from jax.experimental import sparse as jsparse

for dtype in (jnp.float16, jnp.bfloat16, jnp.float32):
    matrix = jsparse.BCOO((jnp.ones(4096, dtype), jnp.zeros((4096, 1), jnp.int32)), shape=(1,))
    print(f"{jnp.dtype(dtype).name:9s} BCOO.sum_duplicates: {float(matrix.sum_duplicates().data[0]):7.1f}   expected 4096.0")

import numpy as np  # noqa: E402

values = np.array([-2.0, 140.5, 2.0, 0.5, 0.148681640625, -140.5, 2.0, -10.34375], np.float16)
matrix = jsparse.BCOO((jnp.asarray(values), jnp.zeros((len(values), 1), jnp.int32)), shape=(1,))
print(f"float16   BCOO.sum_duplicates: {float(matrix.sum_duplicates().data[0])}   correctly rounded "
      f"{float(np.float16(values.astype(np.float64).sum()))} (exact {values.astype(np.float64).sum()})")
