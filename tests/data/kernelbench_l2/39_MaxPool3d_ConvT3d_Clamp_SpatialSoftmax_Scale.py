import torch
import torch.nn as nn


class Model(nn.Module):
    """Max pooling of the input, a transposed Conv3d, clamp, softmax over each channel's flattened
    spatial dims, then a per-channel scale of the 5-D result."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool3d(2)
        self.deconv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                         padding=padding)
        self.scale = nn.Parameter(torch.randn(1, out_channels, 1, 1, 1))

    def forward(self, x):
        x = self.pool(x)
        x = self.deconv(x)
        x = torch.clamp(x, -0.5, 0.5)
        b, c, d, h, w = x.shape
        x = x.view(b, c, -1)
        x = torch.softmax(x, dim=2)
        x = x.view(b, c, d, h, w)
        return x * self.scale


batch_size = 2
in_channels = 3
out_channels = 5
depth, height, width = 8, 10, 6
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
