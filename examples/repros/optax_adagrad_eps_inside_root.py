"""optax.adagrad adds eps inside the square root; torch.optim.Adagrad adds it after the root.

torch (torch/optim/adagrad.py): std = sqrt(state_sum) + eps; param -= lr * g / std
optax (optax.scale_by_rss):      update = g * rsqrt(state_sum + eps), and 0 where state_sum == 0

One step, lr = 1, eps = 4, g = 3 on param 1 (as specs/adagrad.yaml::large-eps-after-square-root):
state_sum = 9; torch: 1 - 3 / (sqrt(9) + 4) = 0.571429; optax: 1 - 3 / sqrt(9 + 4) = 0.16795.

With torch's default eps = 1e-10 it shows as soon as a gradient is as small as sqrt(eps)
(specs/adagrad.yaml::default-hyperparameters: lr = 0.01, g = 1e-9): torch 1 - 0.01 * 1e-9 / 1.1e-9
= 0.990909; optax 1 - 0.01 * 1e-9 / sqrt(1e-18 + 1e-10) = 0.999999, a 9000 times smaller step.
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

# torch's default eps (1e-10) and lr (0.01), a gradient of 1e-9 (float64: jax_enable_x64)
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
lr, eps, g = 0.01, 1e-10, 1e-9
transform = optax.adagrad(learning_rate=lr, initial_accumulator_value=0.0, eps=eps)
param = jnp.array([1.0, 1.0], jnp.float64)
updates, _ = transform.update(jnp.array([g, 0.0], jnp.float64), transform.init(param), param)
print("default eps, g = 1e-9: optax", [round(float(x), 6) for x in optax.apply_updates(param, updates)],
      " torch Adagrad (spec)", [round(1.0 - lr * g / ((g * g) ** 0.5 + eps), 6), 1.0])
