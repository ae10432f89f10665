"""The training engine and its helpers: the loop (engine), optimizer and schedule (optim),
autocast and loss scaling (precision), DDP (distributed), checkpoints, TensorBoard."""
