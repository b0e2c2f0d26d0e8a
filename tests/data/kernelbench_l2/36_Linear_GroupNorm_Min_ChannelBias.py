import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, GroupNorm, the minimum over the features (one value per row), then a bias of shape
    (1, out_features, 1, 1) added and tanh: the [batch, 1] minimum broadcast against the bias to a
    [1, out_features, batch, 1] result, larger than the chain's value (a pass of its own)."""

    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.gn = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(1, out_features, 1, 1))

    def forward(self, x):
        x = self.gn(self.fc(x))
        x = torch.min(x, dim=1, keepdim=True)[0]
        x = x + self.bias
        return torch.tanh(x)


batch_size = 24
in_features = 40
out_features = 32
num_groups = 4


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
