import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds a variable number of tensors."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, *xs):
        return sum(xs)


count = 3
size = 4096


def get_inputs():
    return [torch.randn(size) for _ in range(count)]


def get_init_inputs():
    return []
