import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv3d, GroupNorm, clamp."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(4, out_channels)

    def forward(self, x):
        x = self.norm(self.conv(x))
        return torch.clamp(x, max=0.5)


batch_size = 4
in_channels = 3
out_channels = 8
depth, height, width = 8, 16, 16
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
