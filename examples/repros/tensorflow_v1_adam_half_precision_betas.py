"""tf.compat.v1.train.AdamOptimizer turns its hyperparameters into tensors of the variable's dtype
before computing 1 - beta2 (and 1 - beta1): in bfloat16, beta2 = 0.999 rounds to 1.0, so
1 - beta2 = 0 and the second moment never grows; in float16 1 - beta2 = 0.000977 (2.3% off).
For float32 and float64 variables the hyperparameters are float32 tensors (beta2 =
0.99900001287..., so 1 - beta2 is 1.3e-5 off in relative terms; float64 variables get them cast up
from float32). torch.optim.SparseAdam computes 1 - beta2 in Python
floats (float64).

specs/sparse_adam.yaml::docs-mask-example: one step, g = 0.5 -> exp_avg_sq = 0.001 * 0.25 = 0.00025.

The parameter shows it too (torch: [0.99, 1.0]). In bfloat16 the beta power 0.999 is 1.0, so the
step size lr * sqrt(1 - beta2_power) / (1 - beta1_power) is 0 and the parameter does not move
(generated sparse_adam-rounds-correctly[bfloat16]). In float16 epsilon = 1e-8 rounds to 0, and as
the sparse apply is not lazy (tensorflow_v1_adam_not_lazy.py) the untouched entry computes
0 / (sqrt(0) + 0) = NaN (sparse_adam-rounds-correctly[float16], sparse_adam-unspecified-unchanged).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

for dtype in (tf.bfloat16, tf.float16, tf.float32, tf.float64):
    var = tf.Variable(tf.constant([1.0, 1.0], dtype))
    opt = tf.compat.v1.train.AdamOptimizer(learning_rate=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8)
    grad = tf.IndexedSlices(tf.constant([0.5], dtype), tf.constant([0]), tf.constant([2]))
    opt.apply_gradients([(grad, var)])
    v = float(tf.cast(opt.get_slot(var, "v")[0], tf.float64))
    print(f"{dtype.name:9s} exp_avg_sq[0] = {v:.12g}   expected 0.00025 (relative error {abs(v - 0.00025) / 0.00025:.2g})"
          f"   param = {[float(x) for x in tf.cast(var, tf.float64).numpy()]}   expected [0.99, 1.0]")
