import torch
import torch.nn as nn


class Model(nn.Module):
    """A 2D convolution with an asymmetric, dilated kernel and no padding: its window spans
    2 * (3 - 1) + 1 = 5 rows and 4 * (7 - 1) + 1 = 25 columns."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, dilation: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, dilation=dilation, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 4
in_channels = 16
out_channels = 32
kernel_size = (3, 7)
dilation = (2, 4)
height = 128
width = 256


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, dilation]
