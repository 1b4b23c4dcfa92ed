"""optax.adam adds eps to the bias-corrected root; torch.optim.SparseAdam adds it to the uncorrected one.

torch SparseAdam (torch/optim/_functional.py sparse_adam):
    param -= lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)
optax.adam:
    param -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)
The two agree only for eps = 0; at step 1 optax's eps is effectively eps / sqrt(1 - b2) = 31.6 eps.
"""

import math

import jax.numpy as jnp
import optax

lr, b1, b2, eps = 1.0, 0.9, 0.999, 1.0
param, grad = jnp.array([1.0]), jnp.array([1.0])
transform = optax.adam(learning_rate=lr, b1=b1, b2=b2, eps=eps)
updates, _ = transform.update(grad, transform.init(param), param)
got = float(optax.apply_updates(param, updates)[0])
m, v = (1 - b1) * 1.0, (1 - b2) * 1.0
expected = 1.0 - lr * math.sqrt(1 - b2) / (1 - b1) * m / (math.sqrt(v) + eps)
print("optax.adam, one step      :", round(got, 6))
print("torch SparseAdam (spec)   :", round(expected, 6))

# with the default eps = 1e-8 it shows as soon as gradients are small (g = 1e-6, one step, lr = 1)
eps, g = 1e-8, 1e-6
transform = optax.adam(learning_rate=lr, b1=b1, b2=b2, eps=eps)
zero = jnp.array([0.0])
updates, _ = transform.update(jnp.array([g]), transform.init(zero), zero)
m, v = (1 - b1) * g, (1 - b2) * g * g
print("default eps, g = 1e-6: optax", round(float(optax.apply_updates(zero, updates)[0]), 6),
      " torch SparseAdam (spec)", round(-lr * math.sqrt(1 - b2) / (1 - b1) * m / (math.sqrt(v) + eps), 6))
