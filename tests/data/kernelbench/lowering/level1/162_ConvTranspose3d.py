import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose3d with dilation and a bias."""

    def __init__(self, cin: int, cout: int):
        super(Model, self).__init__()
        self.conv = nn.ConvTranspose3d(cin, cout, 3, stride=(2, 1, 1), dilation=2, bias=True)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
cin = 4
cout = 8
depth = 8
height = 10
width = 10


def get_inputs():
    return [torch.randn(batch_size, cin, depth, height, width)]


def get_init_inputs():
    return [cin, cout]
