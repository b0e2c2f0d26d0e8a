import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.layer_norm over the last dim without a weight or bias."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=1e-6)


batch_size = 16
features = 384


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
