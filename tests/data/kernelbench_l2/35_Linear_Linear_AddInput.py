import torch
import torch.nn as nn


class Model(nn.Module):
    """Two Linears, the second's output plus a forward input of its shape: a full-size operand in
    a later product's kernel, whose epilogue has no element index (refused with its reason)."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x, y):
        return self.fc2(torch.relu(self.fc1(x))) + y


batch_size = 32
in_features = 64
hidden = 40
out_features = 48


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
