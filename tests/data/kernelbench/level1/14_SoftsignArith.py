import torch
import torch.nn as nn


class Model(nn.Module):
    """Softsign written with arithmetic around one call of an op that is the identity on [0, 1):
    the forward as a whole is not."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (1 + torch.abs(x))


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
