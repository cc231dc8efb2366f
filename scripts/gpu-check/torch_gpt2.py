"""examples/gpt2/make_model.py's decoder in PyTorch, the peer of the GPU
check's timed step (scripts/gpu-check/check.py): the same blocks, shapes and
parameter names, so one set of arrays loads into both.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(width, 3 * width)
        self.attn.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x, future):
        batch, seq, width = x.shape
        head_dim = width // self.heads
        q, k, v = self.attn.qkv(self.ln1(x)).split(width, dim=2)
        q = q.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.heads, head_dim).permute(0, 2, 3, 1)
        v = v.view(batch, seq, self.heads, head_dim).transpose(1, 2)
        scores = (q @ k) * (1 / math.sqrt(head_dim))
        scores = scores.masked_fill(future, float("-inf"))
        y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, seq, width)
        x = x + self.attn.proj(y)
        h = self.fc(self.ln2(x))
        h = (h * 0.5) * (torch.erf(h / math.sqrt(2)) + 1)
        return x + self.out(h)


class Gpt2(nn.Module):
    def __init__(self, layers, width, heads, vocab, seq):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, width)
        self.pos_emb = nn.Embedding(seq, width)
        self.h = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.register_buffer("future", torch.ones(seq, seq).triu(1).bool(), persistent=False)

    def forward(self, idx, targets):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(positions)
        for block in self.h:
            x = block(x, self.future)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
