"""optax.adagrad adds eps inside the square root; torch.optim.Adagrad adds it after the root.

torch (torch/optim/adagrad.py): std = sqrt(state_sum) + eps; param -= lr * g / std
optax (optax.scale_by_rss):      update = g * rsqrt(state_sum + eps), and 0 where state_sum == 0

One step, lr = 1, eps = 4, g = 3 on param 1 (as specs/adagrad.yaml::large-eps-after-square-root):
state_sum = 9; torch: 1 - 3 / (sqrt(9) + 4) = 0.571429; optax: 1 - 3 / sqrt(9 + 4) = 0.16795.
"""

import jax.numpy as jnp
import optax

param = jnp.array([1.0, 1.0])
grad = jnp.array([3.0, 0.0])
lr, eps = 1.0, 4.0
transform = optax.adagrad(learning_rate=lr, initial_accumulator_value=0.0, eps=eps)
updates, _ = transform.update(grad, transform.init(param), param)
got = optax.apply_updates(param, updates)
# torch's formula, by hand: state_sum = 9, std = sqrt(9) + 4 = 7, param = 1 - 3 / 7
expected = [1.0 - 3.0 / (9.0**0.5 + eps), 1.0]
print("optax.adagrad        :", [round(float(x), 6) for x in got])
print("torch Adagrad (spec) :", [round(x, 6) for x in expected])
print("optax = 1 - 3 / sqrt(9 + 4) =", round(1 - 3 / (9 + eps) ** 0.5, 6))
