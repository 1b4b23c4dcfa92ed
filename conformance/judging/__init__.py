"""Judging one case: the verdict against golden values, the NumPy reference and the other backends
(:mod:`.verdict`), and the runner that executes a spec case on a backend (:mod:`.runner`)."""
