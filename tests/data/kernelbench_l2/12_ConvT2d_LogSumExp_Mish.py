import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose2d, logsumexp over channels, mish."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = torch.logsumexp(self.deconv(x), dim=1, keepdim=True)
        return F.mish(x)


batch_size = 8
in_channels = 4
out_channels = 16
height, width = 32, 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
