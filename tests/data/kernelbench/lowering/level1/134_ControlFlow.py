import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A branch on the data."""

    def __init__(self):
        super(Model, self).__init__()


    def forward(self, x):
        if x.sum() > 0:
            return torch.relu(x)
        return torch.sigmoid(x)


batch_size = 64
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
