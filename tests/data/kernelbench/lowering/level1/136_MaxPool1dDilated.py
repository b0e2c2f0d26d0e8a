import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Max pooling 1D with stride, padding and dilation."""

    def __init__(self):
        super(Model, self).__init__()
        self.pool = nn.MaxPool1d(kernel_size=4, stride=2, padding=2, dilation=2)

    def forward(self, x):
        return self.pool(x)


batch_size = 8
channels = 16
length = 1000


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
