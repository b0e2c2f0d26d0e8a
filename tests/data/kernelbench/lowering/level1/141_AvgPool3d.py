import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Average pooling 3D."""

    def __init__(self):
        super(Model, self).__init__()
        self.pool = nn.AvgPool3d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


batch_size = 2
channels = 4
depth = 16
height = 16
width = 16


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
