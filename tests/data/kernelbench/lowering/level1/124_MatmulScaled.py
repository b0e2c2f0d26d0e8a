import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A product scaled after the fact (an epilogue)."""

    def __init__(self):
        super(Model, self).__init__()


    def forward(self, A, B):
        return torch.matmul(A, B) * 0.5


M = 512
K = 256
N = 512


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
