"""tf.compat.v1.train.AdamOptimizer's sparse apply (tf.IndexedSlices gradient) decays both moments
and moves the parameter at every row, not only at the gradient's rows as torch.optim.SparseAdam
does (and as TF's own LazyAdam, in TF Addons, did).

Two steps on a 3-vector, lr = 0.1: row 0 then row 2. SparseAdam leaves row 0 alone in step 2.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

var = tf.Variable([1.0, 1.0, 1.0])
opt = tf.compat.v1.train.AdamOptimizer(learning_rate=0.1, beta1=0.9, beta2=0.999, epsilon=1e-8)
opt.apply_gradients([(tf.IndexedSlices(tf.constant([1.0]), tf.constant([0]), tf.constant([3])), var)])
after_1 = var.numpy().tolist(), opt.get_slot(var, "m").numpy().tolist()
opt.apply_gradients([(tf.IndexedSlices(tf.constant([1.0]), tf.constant([2]), tf.constant([3])), var)])
print("after step 1: param", after_1[0], " exp_avg", after_1[1])
print("after step 2: param", var.numpy().tolist(), " exp_avg", opt.get_slot(var, "m").numpy().tolist())
print("SparseAdam after step 2: param[0] stays", round(after_1[0][0], 6), "and exp_avg[0] stays", round(after_1[1][0], 6))
