import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, dropout (identity in eval), softmax over features."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = self.drop(self.fc(x))
        return torch.softmax(x, dim=1)


batch_size = 64
in_features = 256
out_features = 128


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
