import torch
import torch.nn as nn


class Model(nn.Module):
    """A 2D convolution with a square kernel, no padding."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 bias: bool = False):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride,
                              bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
height = 256
width = 128


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
