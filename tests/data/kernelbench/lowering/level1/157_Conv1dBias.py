import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv1d with stride, padding, dilation and a bias."""

    def __init__(self, cin: int, cout: int):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(cin, cout, 3, stride=2, padding=1, dilation=2, bias=True)

    def forward(self, x):
        return self.conv(x)


batch_size = 4
cin = 8
cout = 16
length = 500


def get_inputs():
    return [torch.randn(batch_size, cin, length)]


def get_init_inputs():
    return [cin, cout]
