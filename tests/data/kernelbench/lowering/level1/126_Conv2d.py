import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A convolution with padding and a bias."""

    def __init__(self, cin: int, cout: int, k: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=1)

    def forward(self, x):
        return self.conv(x)


batch_size = 4
cin = 8
cout = 16
k = 3
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, cin, height, width)]


def get_init_inputs():
    return [cin, cout, k]
