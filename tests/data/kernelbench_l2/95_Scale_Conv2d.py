import torch
import torch.nn as nn


class Model(nn.Module):
    """An elementwise op over the input before the convolution: no pass starts the chain."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = x * 2.0
        return self.conv(x)


batch_size = 2
in_channels = 4
out_channels = 8
height, width = 10, 10
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
