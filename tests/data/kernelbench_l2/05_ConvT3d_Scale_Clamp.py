import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose3d, a per-channel scale parameter, clamp."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=2)
        self.gain = nn.Parameter(torch.ones(out_channels, 1, 1, 1))

    def forward(self, x):
        x = self.deconv(x) * self.gain
        return torch.clamp(x, min=-1.0, max=1.0)


batch_size = 4
in_channels = 3
out_channels = 8
depth, height, width = 8, 16, 16
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
