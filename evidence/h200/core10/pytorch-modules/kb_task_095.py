# Generated from the task contract's `pytorch` expression.
import math

import torch
import torch.nn.functional as F


def kb_task_095(pred, target):
    return torch.nn.functional.cross_entropy(pred, target)
