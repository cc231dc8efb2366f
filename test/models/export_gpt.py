"""Export a tiny GPT-style decoder with its language-modelling loss to ONNX.

Usage: export_gpt.py OUT.onnx

vocab 64, d_model 32, 2 heads, 2 blocks, seq 16, batch 2. Token and position
embeddings (nn.Embedding), pre-LayerNorm blocks of hand-written causal
multi-head self-attention (the causal mask is a float buffer registered on the
model, an initializer in the ONNX file) and an MLP
with exact (erf) GELU, a final LayerNorm and an LM head. The loss is
F.cross_entropy of the logits at positions 0..T-2 against targets[:, 1:]; a few
targets are -100 (ignored).

Graph inputs: idx (2x16 int64), targets (2x16 int64). Output: loss (scalar f32).
Exported with torch.onnx.export at opset 17, static shapes, no constant folding.
Prints nothing.
"""
import math
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_export import export_with_loss

VOCAB, D_MODEL, HEADS, LAYERS, SEQ, BATCH = 64, 32, 2, 2, 16, 2
IGNORE = -100


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x, causal_mask):
        b, t, c = x.shape
        hd = c // HEADS
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, HEADS, hd).transpose(1, 2)
        k = k.view(b, t, HEADS, hd).transpose(1, 2)
        v = v.view(b, t, HEADS, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(causal_mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.attn = CausalSelfAttention()
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
        self.gelu = nn.GELU()  # exact erf form
        self.out = nn.Linear(4 * D_MODEL, D_MODEL)

    def forward(self, x, causal_mask):
        x = x + self.attn(self.ln1(x), causal_mask)
        x = x + self.out(self.gelu(self.fc(self.ln2(x))))
        return x


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, D_MODEL)
        self.pos_emb = nn.Embedding(SEQ, D_MODEL)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
        # One mask shared by the blocks: torch's exporter merges initializers
        # with equal contents, so a copy per block would export as one tensor.
        mask = torch.tril(torch.ones(SEQ, SEQ)).view(1, 1, SEQ, SEQ)
        self.register_buffer("causal_mask", mask)

    def forward(self, idx, targets):
        b, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.int64)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x, self.causal_mask)
        logits = self.head(self.ln_f(x))
        shifted = logits[:, :-1, :].reshape(-1, VOCAB)
        labels = targets[:, 1:].reshape(-1)
        return F.cross_entropy(shifted, labels, ignore_index=IGNORE)


def build():
    torch.manual_seed(0)
    model = GPT()
    # LayerNorm starts at weight 1, bias 0 in every block; the exporter would
    # merge those equal initializers and drop their names, so perturb them.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    model.eval()
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.int64)
    targets[0, 5] = IGNORE
    targets[1, 9] = IGNORE
    targets[1, 15] = IGNORE
    return model, (idx, targets)


def export(path):
    model, args = build()
    return export_with_loss(model, args, path, ["idx", "targets"])


if __name__ == "__main__":
    export(sys.argv[1])
