import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, logsumexp over features, ReLU."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = torch.logsumexp(self.fc(x), dim=1, keepdim=True)
        return torch.relu(x)


batch_size = 32
in_features = 64
out_features = 48


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
