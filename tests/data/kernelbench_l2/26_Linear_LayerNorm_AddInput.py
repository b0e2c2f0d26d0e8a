import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, LayerNorm, then a second forward input of the output's shape added and multiplied
    (a full-size operand, read at the element's index in the norm kernel's elementwise pass)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.ln = nn.LayerNorm(out_features)

    def forward(self, x, y):
        x = self.ln(self.fc(x))
        x = x + y
        return x * y


batch_size = 32
in_features = 64
out_features = 48


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features]
