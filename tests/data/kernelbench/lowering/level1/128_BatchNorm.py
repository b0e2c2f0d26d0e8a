import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Batch normalisation in training mode."""

    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x):
        return self.bn(x)


batch_size = 4
features = 16
dim1 = 32
dim2 = 32


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
