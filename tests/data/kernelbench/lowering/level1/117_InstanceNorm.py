import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Instance normalisation (not affine)."""

    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x):
        return self.inorm(x)


batch_size = 8
features = 16
dim1 = 64
dim2 = 64


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
