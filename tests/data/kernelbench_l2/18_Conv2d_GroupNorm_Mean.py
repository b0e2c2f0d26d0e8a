import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, GroupNorm, mean over channels and space."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.gn = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.gn(self.conv(x))
        return x.mean(dim=[1, 2, 3])


batch_size = 4
in_channels = 3
out_channels = 16
height, width = 16, 16
kernel_size = 3
num_groups = 4


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
