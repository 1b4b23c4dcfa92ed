"""Adapters that gate real implementations which are not torch, through the candidate contract
(README, "Gating a candidate implementation"):

    python -m pytest specs --conformance-device cpu \
        --conformance-impl coalesce=examples.candidates.scipy_sparse:coalesce

==========================  ===========  ==================================================
module                      op           the library call that does the math
==========================  ===========  ==================================================
scipy_sparse:coalesce       coalesce     scipy.sparse.coo_array.sum_duplicates
jax_sparse:coalesce         coalesce     jax.experimental.sparse.BCOO.sum_duplicates
jax_numpy:masked_mean       masked_mean  jax.numpy.mean(where=mask), gradient by jax.vjp
optax_optim:Adagrad         adagrad      optax.adagrad (update on a dense view)
optax_optim:SparseAdam      sparse_adam  optax.adam on the gathered specified entries
tensorflow_ops:Adagrad      adagrad      tf.raw_ops.ResourceSparseApplyAdagradV2 / ResourceApplyAdagradV2
tensorflow_ops:SparseAdam   sparse_adam  tf.compat.v1.train.AdamOptimizer, sparse apply
tensorflow_ops:masked_mean  masked_mean  tf.reduce_mean(tf.boolean_mask), gradient by GradientTape
numpy_ma:masked_mean        masked_mean  numpy.ma.MaskedArray.mean (value and gradient)
==========================  ===========  ==================================================

Each adapter converts torch tensors to the library's arrays, calls the library's op and converts
back; what the library cannot express raises ``conformance.Unsupported`` with the reason.
"""
