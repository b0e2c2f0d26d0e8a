import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Scales the rows' last axis by y [batch_size]: dim == batch_size at the official shape, and
    dim sizes the module (an init argument). The module needs the two equal, so the import keeps
    them equal at its check shapes (the tail shape would otherwise grow batch_size alone)."""

    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x, y):
        return torch.relu(x * y)


batch_size = 64
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size)]


def get_init_inputs():
    return [dim]
