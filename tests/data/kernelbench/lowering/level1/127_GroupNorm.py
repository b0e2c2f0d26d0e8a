import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Group normalisation: per-channel affine over groups."""

    def __init__(self, num_features: int, num_groups: int):
        super(Model, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x):
        return self.gn(x)


batch_size = 4
features = 16
groups = 4
dim1 = 32
dim2 = 32


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features, groups]
