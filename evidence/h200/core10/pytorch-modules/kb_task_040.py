# Generated from the task contract's `pytorch` expression.
import math

import torch
import torch.nn.functional as F


def kb_task_040(x, weight, bias):
    eps = 1e-05
    return torch.nn.functional.layer_norm(x, x.shape[1:], weight, bias, eps)
