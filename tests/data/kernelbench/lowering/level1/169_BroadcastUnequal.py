import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Broadcasting x [batch_size, dim] against y [batch_size] with dim != batch_size: PyTorch
    refuses it."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, y):
        return torch.mean(x * y)


batch_size = 64
dim = 128


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size)]


def get_init_inputs():
    return []
