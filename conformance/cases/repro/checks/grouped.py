
import io

SEEN = []


def grouped(cases, resume_after=None):
    """One optimizer, a param group per case (the parameter without a gradient is left out); with
    resume_after, its state_dict goes through torch.save/torch.load into a fresh one after that step."""
    params = [tensor(c["inputs"]["param"]).to(DTYPE) for c in cases]
    groups = []
    for c, p in zip(cases, params):
        hyper = dict(c["inputs"].get("hyperparameters", {}))
        if "betas" in hyper:
            hyper["betas"] = tuple(hyper["betas"])
        groups.append({"params": [p], **hyper})
    optimizer = impl(groups)
    for step in range(1, len(cases[0]["inputs"]["grads"]) + 1):
        for c, p in zip(cases, params):
            p.grad = grad_of(c["inputs"]["grads"][step - 1])
        optimizer.step()
        if step == resume_after:
            buffer = io.BytesIO()
            torch.save(optimizer.state_dict(), buffer)
            buffer.seek(0)
            params = [p.detach().clone() for p in params]
            optimizer = impl([{**g, "params": [p]} for g, p in zip(groups, params)])
            optimizer.load_state_dict(torch.load(buffer, weights_only=False))
    return [{"param": p.detach(), **{n: optimizer.state[p][k] for n, k in STATE.items()}} for p in params]
