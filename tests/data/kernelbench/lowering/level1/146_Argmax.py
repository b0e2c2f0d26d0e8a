import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Argmax over a dim."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmax(x, dim=self.dim)


batch_size = 16
dim1 = 256
dim2 = 255
red_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [red_dim]
