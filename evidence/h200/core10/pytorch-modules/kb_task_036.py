# Generated from the task contract's `pytorch` expression.
import math

import torch
import torch.nn.functional as F


def kb_task_036(x):
    eps = 1e-05
    return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + eps)
