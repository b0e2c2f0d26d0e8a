import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, BatchNorm2d without running statistics (batch statistics), ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels, track_running_stats=False)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 4
in_channels = 3
out_channels = 8
height, width = 10, 10
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
