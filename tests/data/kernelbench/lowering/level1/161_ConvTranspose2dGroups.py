import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose2d with groups."""

    def __init__(self, cin: int, cout: int):
        super(Model, self).__init__()
        self.conv = nn.ConvTranspose2d(cin, cout, (3, 3), stride=2, padding=1, groups=2, bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 4
cin = 8
cout = 16
height = 24
width = 24


def get_inputs():
    return [torch.randn(batch_size, cin, height, width)]


def get_init_inputs():
    return [cin, cout]
