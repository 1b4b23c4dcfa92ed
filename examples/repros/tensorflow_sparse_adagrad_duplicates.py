"""tf.raw_ops.ResourceSparseApplyAdagradV2 squares duplicate indices one by one instead of summing
them first (torch coalesces the gradient, then squares).

specs/adagrad.yaml::duplicates-summed-before-squaring: param [[1, 1], [1, 1]], lr = 1, one gradient
with entries 1.0 and 2.0 both at (0, 1). torch: g = 3, state_sum = 9, param(0, 1) = 1 - 3 / 3 = 0.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

var = tf.Variable([1.0, 1.0, 1.0, 1.0])          # the 2x2 parameter, rows linearized
accum = tf.Variable([0.0, 0.0, 0.0, 0.0])
tf.raw_ops.ResourceSparseApplyAdagradV2(var=var.handle, accum=accum.handle, lr=tf.constant(1.0),
                                        epsilon=tf.constant(1e-10), grad=tf.constant([1.0, 2.0]),
                                        indices=tf.constant([1, 1]))
print("TensorFlow  accum(0,1) =", float(accum[1]), " param(0,1) =", float(var[1]))
print("torch/spec  accum(0,1) = 9.0  param(0,1) = 0.0")
print("(TF: accum = 1, param = 1 - 1/1 = 0; then accum = 1 + 4 = 5, param = 0 - 2/sqrt(5) = -0.894427)")
