import torch
import torch.nn as nn


class Model(nn.Module):
    """Instance normalisation with a learnable per-channel affine."""

    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features, affine=True)

    def forward(self, x):
        return self.inorm(x)


batch_size = 4
features = 8
dim1 = 16
dim2 = 24


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
