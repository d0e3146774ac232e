"""The tiny decoder the smoke's training step trains, shaped by the config but never by its sizes. [torch]

Shapes satisfy the parallelism: heads and KV heads divisible by tp, one layer
per pipeline stage (two stages per rank for looped schedules), experts
divisible by ep and their hidden size by etp. Layers live in a ModuleDict
keyed "0", "1", ... so a pipeline stage keeps some and drops the rest, the
way torchtitan splits its models; embeddings and head are None off the first
and last stage. Everything is fp32 and deterministic (one seed), so the same
model built on every rank is the unsharded reference too.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

SEED = 20261122


class TinyConfig(NamedTuple):
    vocab: int
    dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    hidden: int
    n_layers: int
    n_experts: int          # 0: dense feed-forward
    top_k: int
    expert_hidden: int
    seq_len: int

    @property
    def moe(self) -> bool:
        return self.n_experts > 0


def shape(degrees: dict, stages: int, moe: bool) -> TinyConfig:
    """The smallest model that every degree divides; ``stages`` is the number of pipeline stages in all."""
    tp, ep, etp, cp = (degrees.get(k) or 1 for k in ("tp", "ep", "etp", "cp"))
    n_kv = tp
    head_dim = 8
    n_heads = 2 * n_kv
    dim = n_heads * head_dim
    experts = 2 * ep if (moe or ep > 1) else 0
    return TinyConfig(vocab=32 * tp, dim=dim, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, hidden=4 * dim,
                      n_layers=max(stages, 2), n_experts=experts, top_k=min(2, experts) if experts else 0,
                      expert_hidden=2 * dim * etp // math.gcd(2 * dim, etp), seq_len=8 * 2 * cp)


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Attention(nn.Module):
    """Grouped-query causal attention; heads are counted from the local tensors, so TP shards work as they are.

    ``context`` (context parallelism) gathers K and V from the cp group and
    offsets the causal mask by the rank's position in the sequence.
    """

    def __init__(self, c: TinyConfig):
        super().__init__()
        self.head_dim = c.head_dim
        self.wq = nn.Linear(c.dim, c.n_heads * c.head_dim, bias=False)
        self.wk = nn.Linear(c.dim, c.n_kv_heads * c.head_dim, bias=False)
        self.wv = nn.Linear(c.dim, c.n_kv_heads * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * c.head_dim, c.dim, bias=False)
        self.context = None  # set by the context-parallel plan: (gather_fn, my chunk index, chunks)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        offset = 0
        if self.context is not None:
            gather, index, _ = self.context
            k, v = gather(k), gather(v)
            offset = index * s
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        rows = torch.arange(s, device=x.device).unsqueeze(1) + offset
        cols = torch.arange(k.shape[2], device=x.device).unsqueeze(0)
        mask = cols <= rows
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Experts(nn.Module):
    """``num_experts`` SwiGLU experts as three stacked weights (torchtitan's GroupedExperts layout)."""

    def __init__(self, n: int, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n, dim, hidden) * 0.02)
        self.w2 = nn.Parameter(torch.randn(n, hidden, dim) * 0.02)
        self.w3 = nn.Parameter(torch.randn(n, dim, hidden) * 0.02)

    def local(self):
        """The weights this rank holds (a DTensor's shard under EP/ETP)."""
        return [w.to_local() if hasattr(w, "to_local") else w for w in (self.w1, self.w2, self.w3)]

    def forward(self, tokens: torch.Tensor, counts: list) -> torch.Tensor:
        """Tokens grouped by local expert, ``counts[e]`` each, through their experts (a forward, so FSDP unshards)."""
        w1, w2, w3 = self.local()
        outs, start = [], 0
        for e, n in enumerate(counts):
            x = tokens[start:start + n]
            outs.append((F.silu(x @ w1[e]) * (x @ w3[e])) @ w2[e])
            start += n
        return torch.cat(outs) if outs else tokens[:0]


class MoE(nn.Module):
    """Top-k softmax router over the experts; the dispatch is local unless EP installs its own."""

    def __init__(self, c: TinyConfig):
        super().__init__()
        self.top_k = c.top_k
        self.router = nn.Linear(c.dim, c.n_experts, bias=False)
        self.experts = Experts(c.n_experts, c.dim, c.expert_hidden)
        self.dispatch = None  # set by expert parallelism: (tokens, expert ids) -> outputs in the same order

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = F.softmax(self.router(x), dim=-1)
        weight, chosen = scores.topk(self.top_k, dim=-1)
        weight = weight / weight.sum(-1, keepdim=True)
        token_idx = torch.arange(x.shape[0], device=x.device).repeat_interleave(self.top_k)
        expert_idx = chosen.reshape(-1)
        order = torch.argsort(expert_idx, stable=True)
        routed = x[token_idx[order]]
        if self.dispatch is None:
            counts = torch.bincount(expert_idx, minlength=self.router.out_features).tolist()
            out = self.experts(routed, counts)
        else:
            out = self.dispatch(routed, expert_idx[order])
        out = out * weight.reshape(-1)[order].unsqueeze(-1)
        combined = torch.zeros_like(x).index_add(0, token_idx[order], out)
        return combined.reshape(shape)


class Block(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.attention_norm = RMSNorm(c.dim)
        self.attention = Attention(c)
        self.ffn_norm = RMSNorm(c.dim)
        self.feed_forward = MoE(c) if c.moe else FeedForward(c.dim, c.hidden)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Decoder(nn.Module):
    def __init__(self, c: TinyConfig):
        super().__init__()
        self.config = c
        self.tok_embeddings = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleDict({str(i): Block(c) for i in range(c.n_layers)})
        self.norm = RMSNorm(c.dim)
        self.output = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        for layer in self.layers.values():
            h = layer(h)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def build(c: TinyConfig) -> Decoder:
    """The same weights on every rank and in the reference: one seed, CPU init, fp32."""
    torch.manual_seed(SEED)
    with torch.device("cpu"):
        return Decoder(c)


def batch(c: TinyConfig, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A deterministic global batch of token ids and next-token labels."""
    g = torch.Generator().manual_seed(SEED + 1)
    data = torch.randint(0, c.vocab, (rows, c.seq_len + 1), generator=g)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
