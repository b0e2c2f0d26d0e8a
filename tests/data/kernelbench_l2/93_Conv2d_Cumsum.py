import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d then a scan the planner does not place."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.cumsum(self.conv(x), dim=1)


batch_size = 8
in_channels = 4
out_channels = 16
height, width = 32, 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
