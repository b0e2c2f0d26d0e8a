import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal attention: the plain form's plan does not hold the mask, so no plan, with why."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


batch_size = 2
heads = 3
seq = 20
embed = 16


def get_inputs():
    return [torch.rand(batch_size, heads, seq, embed), torch.rand(batch_size, heads, seq, embed),
            torch.rand(batch_size, heads, seq, embed)]


def get_init_inputs():
    return []
