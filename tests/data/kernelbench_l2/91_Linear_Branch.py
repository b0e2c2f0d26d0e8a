import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, ReLU, the row sum, and the Linear's output before the ReLU read again after the sum:
    a value inside a kernel (before its epilogue), which no kernel leaves whole (a branch)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.fc(x)
        s = torch.sum(F.relu(y), dim=1, keepdim=True)
        return y - s


batch_size = 64
in_features = 256
out_features = 128


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
