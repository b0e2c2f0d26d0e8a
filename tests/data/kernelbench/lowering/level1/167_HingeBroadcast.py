import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Hinge loss: targets [batch_size] broadcast along the predictions' last axis (trailing
    alignment), legal because input_shape_0 == batch_size at every shape."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 512
input_shape = (512,)


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]


def get_init_inputs():
    return []
