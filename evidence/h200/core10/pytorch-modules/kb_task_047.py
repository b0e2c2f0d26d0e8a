# Generated from the task contract's `pytorch` expression.
import math

import torch
import torch.nn.functional as F


def kb_task_047(x):
    return torch.sum(x, dim=1, keepdim=True)
