import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """The tanh form of GELU, written out."""

    def __init__(self):
        super(Model, self).__init__()


    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


batch_size = 128
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
