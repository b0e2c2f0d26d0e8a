import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, times a number, leaky ReLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.fc(x)
        x = x * 1.5
        return F.leaky_relu(x, negative_slope=0.2)


batch_size = 64
in_features = 256
out_features = 128


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
