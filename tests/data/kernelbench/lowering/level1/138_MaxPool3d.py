import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Max pooling 3D with dilation."""

    def __init__(self):
        super(Model, self).__init__()
        self.pool = nn.MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=2)

    def forward(self, x):
        return self.pool(x)


batch_size = 2
channels = 4
depth = 20
height = 24
width = 28


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
