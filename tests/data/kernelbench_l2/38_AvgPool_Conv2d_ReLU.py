import torch
import torch.nn as nn


class Model(nn.Module):
    """Average pooling of the input, then Conv2d and ReLU: a pass over the input before the anchor."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.pool = nn.AvgPool2d(2)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        x = self.pool(x)
        x = self.conv(x)
        return torch.relu(x)


batch_size = 2
in_channels = 4
out_channels = 8
height, width = 16, 12
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
