"""torch's Adagrad behind a library that imports slowly, at its first use (as TensorFlow or JAX do on
a loaded machine): the first call takes IMPORT_SECONDS, every later one is torch's."""

import time

import torch

IMPORT_SECONDS = 3.0


class SlowImportAdagrad(torch.optim.Adagrad):
    _imported = False

    def step(self, closure=None):
        if not SlowImportAdagrad._imported:
            time.sleep(IMPORT_SECONDS)  # the library's first import
            SlowImportAdagrad._imported = True
        return super().step(closure)
