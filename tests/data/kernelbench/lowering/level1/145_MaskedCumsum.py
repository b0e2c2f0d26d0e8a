import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A scan of x times a 0/1 mask."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)


batch_size = 64
dim = 4096
scan_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, 2, (batch_size, dim))]


def get_init_inputs():
    return [scan_dim]
