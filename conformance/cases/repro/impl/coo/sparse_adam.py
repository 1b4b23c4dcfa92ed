impl = torch.optim.SparseAdam  # stock torch
