
def extra(outputs, case):
    grad = outputs["grad"]
    outside = ~outputs["mask"] & (grad != 0)
    assert not bool(outside.any()), f"grad is not zero outside the mask at {outside.nonzero().tolist()}: {grad}"
