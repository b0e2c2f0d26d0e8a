import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose1d with output_padding and a bias."""

    def __init__(self, cin: int, cout: int):
        super(Model, self).__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.conv(x)


batch_size = 4
cin = 8
cout = 16
length = 200


def get_inputs():
    return [torch.randn(batch_size, cin, length)]


def get_init_inputs():
    return [cin, cout]
