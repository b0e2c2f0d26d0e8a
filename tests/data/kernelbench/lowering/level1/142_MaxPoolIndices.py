import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Max pooling that also returns the indices: not the pool family's form."""

    def __init__(self):
        super(Model, self).__init__()
        self.pool = nn.MaxPool2d(2, return_indices=True)

    def forward(self, x):
        return self.pool(x)


batch_size = 4
channels = 8
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
