import torch


def get_inputs():
    return [torch.rand(16)]


def get_init_inputs():
    return []
