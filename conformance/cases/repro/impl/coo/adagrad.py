impl = torch.optim.Adagrad  # stock torch
