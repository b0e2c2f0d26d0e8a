import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, GroupNorm, tanh, then the conv's output added back (a residual across the norm's
    kernel boundary, read from the workspace at the element's index), then a logsumexp over
    the channels."""

    def __init__(self, in_channels, out_channels, kernel_size, groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x):
        x_conv = self.conv(x)
        x_norm = torch.tanh(self.norm(x_conv))
        x_res = x_conv + x_norm * 2.0
        return torch.logsumexp(x_res, dim=1, keepdim=True)


batch_size = 2
in_channels = 3
out_channels = 8
height = 14
width = 12
kernel_size = 3
groups = 4


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
