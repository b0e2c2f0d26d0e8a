import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm followed by elementwise ops over its value alone: the tail folds into the
    normalize family's apply."""

    def __init__(self, num_features: int, num_groups: int):
        super(Model, self).__init__()
        self.gn = nn.GroupNorm(num_groups, num_features)

    def forward(self, x):
        y = self.gn(x)
        return y * torch.sigmoid(y) * 2.0


batch_size = 4
features = 12
groups = 3
dim1 = 9
dim2 = 10


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features, groups]
