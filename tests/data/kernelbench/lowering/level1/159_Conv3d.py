import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv3d without a bias."""

    def __init__(self, cin: int, cout: int):
        super(Model, self).__init__()
        self.conv = nn.Conv3d(cin, cout, 3, bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
cin = 4
cout = 8
depth = 12
height = 16
width = 16


def get_inputs():
    return [torch.randn(batch_size, cin, depth, height, width)]


def get_init_inputs():
    return [cin, cout]
