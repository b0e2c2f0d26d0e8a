import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled dot-product attention: one operator, two products around a softmax (the Level-2
    tolerance)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


batch_size = 2
num_heads = 4
sequence_length = 64
embedding_dimension = 32


def get_inputs():
    Q = torch.rand(batch_size, num_heads, sequence_length, embedding_dimension)
    K = torch.rand(batch_size, num_heads, sequence_length, embedding_dimension)
    V = torch.rand(batch_size, num_heads, sequence_length, embedding_dimension)
    return [Q, K, V]


def get_init_inputs():
    return []
