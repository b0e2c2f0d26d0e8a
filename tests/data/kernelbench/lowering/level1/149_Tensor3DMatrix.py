import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A 3D tensor times a matrix."""

    def __init__(self):
        super(Model, self).__init__()


    def forward(self, A, B):
        return torch.matmul(A, B)


N = 4
M = 128
K = 256
L = 192


def get_inputs():
    return [torch.rand(N, M, K), torch.rand(K, L)]


def get_init_inputs():
    return []
