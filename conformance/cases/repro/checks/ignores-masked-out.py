
SEEN = []


def extra(outputs, case):
    SEEN.append(outputs)
    if len(SEEN) == 2:
        for name in ("value", "grad"):
            bits_equal(f"{name} (other values under the mask)", SEEN[1][name], SEEN[0][name])
