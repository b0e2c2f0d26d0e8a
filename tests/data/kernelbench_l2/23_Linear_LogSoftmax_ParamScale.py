import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, log_softmax over features, times a per-feature parameter."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        x = torch.log_softmax(self.fc(x), dim=1)
        return x * self.scale


batch_size = 16
in_features = 32
out_features = 24


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
