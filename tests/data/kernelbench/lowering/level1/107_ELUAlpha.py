import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ELU with alpha from the constructor."""

    def __init__(self, alpha: float = 1.0):
        super(Model, self).__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, alpha=self.alpha)


batch_size = 64
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.5]
