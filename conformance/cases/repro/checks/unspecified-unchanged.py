
def extra(outputs, case):
    inputs = case["inputs"]
    start = tensor(inputs["param"]).to(DTYPE)
    init = inputs.get("hyperparameters", {}).get("initial_accumulator_value", 0.0)
    previous = {"param": start, "state_sum": torch.full_like(start, init), "exp_avg": torch.zeros_like(start),
                "exp_avg_sq": torch.zeros_like(start)}
    for step in range(1, len(inputs["grads"]) + 1):
        now = run({**inputs, "grads": inputs["grads"][:step]})
        untouched = ~specified(inputs["grads"][step - 1], now["param"].shape)
        for name in NAMES:
            bits_equal(f"{name} through step {step} at unspecified entries", now[name], previous[name], untouched)
        previous = now
