import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise-separable pair: a depthwise Conv2d (stride 2, padding 1, dilation 2, no bias),
    then a pointwise Conv2d with its bias, then ReLU and a scale. The second convolution runs with
    the first one's strategy over the first one's output."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size, stride=2, padding=1,
                                   dilation=2, groups=in_channels, bias=False)
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=True)

    def forward(self, x):
        x = self.depthwise(x)
        x = self.pointwise(x)
        return torch.relu(x) * 0.5


batch_size = 2
in_channels = 6
out_channels = 10
height = 17
width = 13
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
