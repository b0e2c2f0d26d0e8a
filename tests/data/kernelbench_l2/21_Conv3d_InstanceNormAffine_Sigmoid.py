import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv3d, affine InstanceNorm3d, sigmoid."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.InstanceNorm3d(out_channels, affine=True)

    def forward(self, x):
        return torch.sigmoid(self.norm(self.conv(x)))


batch_size = 2
in_channels = 3
out_channels = 6
depth, height, width = 6, 8, 8
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
