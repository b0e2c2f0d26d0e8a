import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A batched product."""

    def __init__(self):
        super(Model, self).__init__()


    def forward(self, A, B):
        return torch.bmm(A, B)


batch = 8
M = 128
K = 256
N = 192


def get_inputs():
    return [torch.rand(batch, M, K), torch.rand(batch, K, N)]


def get_init_inputs():
    return []
