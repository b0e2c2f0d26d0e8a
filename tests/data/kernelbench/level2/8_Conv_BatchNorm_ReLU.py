import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, batch normalisation, ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size, eps=1e-5):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels, eps=eps)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 32
in_channels = 16
out_channels = 32
height, width = 64, 64
kernel_size = 3
eps = 1e-3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, eps]
