"""A Llama-style model as PyTorch scripts write it (RMSNorm, rotary embeddings from cos/sin tables,
grouped-query attention through scaled_dot_product_attention(enable_gqa=True), a SwiGLU MLP, no
biases), parametrized by the library, `torch` or `rustytorch`: build(lib) returns the model class."""
import math
from dataclasses import dataclass


@dataclass
class LlamaConfig:
    vocab_size: int = 64
    block_size: int = 16
    n_layer: int = 2
    n_head: int = 4
    n_kv_head: int = 2
    n_embd: int = 32
    hidden: int = 64


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    def rotate(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.n_head, self.n_kv_head, self.head_dim = c.n_head, c.n_kv_head, c.n_embd // c.n_head
            self.wq = nn.Linear(c.n_embd, c.n_head * self.head_dim, bias=False)
            self.wkv = nn.Linear(c.n_embd, 2 * c.n_kv_head * self.head_dim, bias=False)
            self.wo = nn.Linear(c.n_embd, c.n_embd, bias=False)

        def forward(self, x, cos, sin):
            B, T, C = x.size()
            q = self.wq(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
            k, v = self.wkv(x).split(self.n_kv_head * self.head_dim, dim=2)
            k = k.view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
            v = v.view(B, T, self.n_kv_head, self.head_dim).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.wo(y.transpose(1, 2).contiguous().view(B, T, C))

    class FeedForward(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.w1 = nn.Linear(c.n_embd, c.hidden, bias=False)
            self.w3 = nn.Linear(c.n_embd, c.hidden, bias=False)
            self.w2 = nn.Linear(c.hidden, c.n_embd, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(c.n_embd, eps=1e-5), nn.RMSNorm(c.n_embd, eps=1e-5)
            self.attention, self.feed_forward = Attention(c), FeedForward(c)

        def forward(self, x, cos, sin):
            x = x + self.attention(self.attention_norm(x), cos, sin)
            return x + self.feed_forward(self.ffn_norm(x))

    class Llama(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.config = c
            self.tok_embeddings = nn.Embedding(c.vocab_size, c.n_embd)
            self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layer))
            self.norm = nn.RMSNorm(c.n_embd, eps=1e-5)
            self.output = nn.Linear(c.n_embd, c.vocab_size, bias=False)
            head_dim = c.n_embd // c.n_head
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            freqs = torch.outer(torch.arange(c.block_size).float(), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos(), persistent=False)
            self.register_buffer("sin", emb.sin(), persistent=False)

        def forward(self, idx, targets=None):
            T = idx.size(1)
            x = self.tok_embeddings(idx)
            cos, sin = self.cos[:T], self.sin[:T]
            for layer in self.layers:
                x = layer(x, cos, sin)
            logits = self.output(self.norm(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    return Llama


def train(torch, model, batches, steps, lr=3e-3):
    """AdamW with a cosine schedule and clipping, as such scripts train; the losses of every step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        x, y = batches(step)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses
