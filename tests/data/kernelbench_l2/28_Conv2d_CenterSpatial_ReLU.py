import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, each channel centred on its spatial mean, ReLU: the mean and the subtraction are
    one normalize launch (a centering) after the convolution, the ReLU folded into it."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = x - torch.mean(x, dim=(2, 3), keepdim=True)
        return torch.relu(x)


batch_size = 4
in_channels = 3
out_channels = 8
height, width = 18, 20
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
