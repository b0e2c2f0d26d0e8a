import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Division by the Frobenius norm of the whole tensor."""

    def __init__(self):
        super(Model, self).__init__()


    def forward(self, x):
        norm = torch.norm(x, p='fro')
        return x / norm


batch_size = 8
features = 16
dim1 = 64
dim2 = 64


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return []
