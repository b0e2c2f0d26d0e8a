# Generated from the task contract's `pytorch` expression.
import math

import torch
import torch.nn.functional as F


def kb_task_101(x, weight):
    eps = 1e-06
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, eps)
