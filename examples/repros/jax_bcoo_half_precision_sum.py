"""jax.experimental.sparse.BCOO.sum_duplicates accumulates float16/bfloat16 duplicates in half
precision, as torch's coalesce does (pytorch/pytorch#84471): 4096 ones at one index sum to 2048 in
float16 and 256 in bfloat16 instead of 4096 (specs/coalesce.yaml::many-duplicates-half-precision).
"""

import jax.numpy as jnp
from jax.experimental import sparse as jsparse

for dtype in (jnp.float16, jnp.bfloat16, jnp.float32):
    matrix = jsparse.BCOO((jnp.ones(4096, dtype), jnp.zeros((4096, 1), jnp.int32)), shape=(1,))
    print(f"{jnp.dtype(dtype).name:9s} BCOO.sum_duplicates: {float(matrix.sum_duplicates().data[0]):7.1f}   expected 4096.0")
