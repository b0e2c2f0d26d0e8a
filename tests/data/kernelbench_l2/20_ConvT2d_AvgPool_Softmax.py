import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose2d, average pooling, softmax over channels."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2)
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        x = self.pool(self.deconv(x))
        return torch.softmax(x, dim=1)


batch_size = 2
in_channels = 4
out_channels = 8
height, width = 8, 8
kernel_size = 4


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
