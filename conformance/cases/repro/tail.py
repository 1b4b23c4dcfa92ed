

def check(case):
    if "expected_error" in case:
        wanted = case["expected_error"]
        try:
            run(case["inputs"])
        except Exception as exc:  # noqa: BLE001
            import re
            assert any(c.__name__ == wanted["type"] for c in type(exc).__mro__), f"raised {exc!r}, expected {wanted}"
            assert re.search(wanted.get("match", ""), str(exc)), f"message {str(exc)!r} does not match {wanted}"
            return
        raise AssertionError(f"nothing was raised; expected {wanted}")
    outputs = run(case["inputs"])
    for name, want in case["expected"].items():
        if name not in outputs:
            raise AssertionError(f"{name} was not produced")
        if name in ("indices", "nnz", "size"):
            got = torch.as_tensor(outputs[name]).tolist()
            assert got == want, f"{name}: expected {want}, got {got}"
        else:
            close(name, outputs[name], want)
    if PROPERTY_CHECK:
        extra(outputs, case)


failures = 0
for case in CASES:
    try:
        check(case)
    except Exception as exc:  # noqa: BLE001 - a mismatch, or the implementation raising
        failures += 1
        print(f"FAIL {case['id']}: {type(exc).__name__}: {exc}")
    else:
        print(f"ok   {case['id']}")
sys.exit(1 if failures else 0)
