import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Sum over a dim given to the constructor, keepdim."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 16
rows = 256
cols = 255
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, rows, cols)]


def get_init_inputs():
    return [reduce_dim]
