import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Max pooling 2D with ceil_mode."""

    def __init__(self):
        super(Model, self).__init__()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)

    def forward(self, x):
        return self.pool(x)


batch_size = 4
channels = 8
height = 65
width = 70


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
