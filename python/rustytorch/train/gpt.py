"""A GPT-2-style language model trained on the King James Bible: pre-LayerNorm blocks with causal
self-attention and a GELU MLP, tied token embedding and output head, GPT-2's initialization, AdamW
with warm-up and cosine decay, gradient clipping. The text comes from Debian's bible-kjv package and
is tokenized with a byte-level BPE trained on it, saved beside the checkpoints with the model's shape.

The model is written against a PyTorch-shaped namespace (`nn`, `F`), so the same code builds it in
rustytorch and, for side-by-side benchmarks, in PyTorch: `gpt_class(torch.nn, torch.nn.functional)`."""
import json
import math
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass

import numpy as np

import rustytorch as rt
from .. import io, nn, optim
from ..autograd import no_grad
from ..nn import functional as F
from ..text import BPETokenizer


@dataclass
class GPTConfig:
    layers: int
    heads: int
    embd: int
    context: int
    vocab: int = 2048
    dropout: float = 0.0


#: Model sizes: "cpu" trains in minutes on two cores; "gpt2" is GPT-2 small (124M parameters with
#: GPT-2's 50304-row padded vocabulary).
PRESETS = {
    "cpu": GPTConfig(layers=4, heads=4, embd=128, context=128, vocab=2048),
    "small": GPTConfig(layers=6, heads=6, embd=384, context=256, vocab=8192),
    "gpt2": GPTConfig(layers=12, heads=12, embd=768, context=1024, vocab=50304),
}


def gpt_class(nn, F):
    """The GPT module class over a PyTorch-shaped library; parameter names follow GPT-2's
    (transformer.wte, transformer.h.0.attn.c_attn, ...)."""

    class CausalSelfAttention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.heads, self.embd, self.dropout = c.heads, c.embd, c.dropout
            self.c_attn = nn.Linear(c.embd, 3 * c.embd)
            self.c_proj = nn.Linear(c.embd, c.embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2)
                       for t in self.c_attn(x).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c_fc = nn.Linear(c.embd, 4 * c.embd)
            self.c_proj = nn.Linear(4 * c.embd, c.embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln_1 = nn.LayerNorm(c.embd)
            self.attn = CausalSelfAttention(c)
            self.ln_2 = nn.LayerNorm(c.embd)
            self.mlp = MLP(c)
            self.drop = nn.Dropout(c.dropout)

        def forward(self, x):
            x = x + self.drop(self.attn(self.ln_1(x)))
            return x + self.drop(self.mlp(self.ln_2(x)))

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.config = c
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(c.vocab, c.embd), wpe=nn.Embedding(c.context, c.embd),
                drop=nn.Dropout(c.dropout), h=nn.ModuleList([Block(c) for _ in range(c.layers)]),
                ln_f=nn.LayerNorm(c.embd)))
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif name.endswith("weight") and p.dim() == 2:
                    residual = name.endswith("c_proj.weight")
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c.layers) if residual else 0.02)

        def forward(self, idx):
            t = self.transformer
            positions = t.wpe.weight[:idx.shape[1]]
            x = t.drop(t.wte(idx) + positions)
            for block in t.h:
                x = block(x)
            return F.linear(t.ln_f(x), t.wte.weight)

    return GPT


GPT = gpt_class(nn, F)


def parameter_groups(model, weight_decay):
    """AdamW groups: matrices decay, biases, LayerNorm parameters (and nothing else) do not."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


# ---------------------------------------------------------------------------------------------
# Text

_VERSE = re.compile(r"^\s+\d+ (.*)$")


def clean_bible(raw):
    """The output of `bible` as plain text: verse numbers and chapter headings dropped, each verse
    on one line, a blank line between chapters."""
    chapters, verses, after_blank = [], [], True
    for line in raw.splitlines():
        if not line.strip():
            after_blank = True
            continue
        match = _VERSE.match(line)
        if match:
            verses.append(match.group(1).strip())
        elif after_blank:  # a chapter heading such as "Genesis 1"
            if verses:
                chapters.append("\n".join(verses))
                verses = []
        elif verses:  # a verse wrapped onto the next line
            verses[-1] += " " + line.strip()
        after_blank = False
    if verses:
        chapters.append("\n".join(verses))
    return "\n\n".join(chapters) + "\n"


def kjv_text(text_file=None):
    """The training text: text_file when given, else the King James Bible from `bible`."""
    if text_file:
        with open(text_file, encoding="utf-8") as f:
            return f.read()
    if shutil.which("bible") is None:
        raise FileNotFoundError("gpt: the `bible` program is missing; install the King James Bible with "
                                "`sudo apt-get install bible-kjv` (or pass --text FILE)")
    raw = subprocess.run(["bible", "gen1:1-rev22:21"], check=True, capture_output=True).stdout
    text = clean_bible(raw.decode("utf-8", errors="replace"))
    if len(text) < 1_000_000:
        raise FileNotFoundError(f"gpt: `bible gen1:1-rev22:21` printed only {len(text)} characters; reinstall "
                                f"with `sudo apt-get install --reinstall bible-kjv bible-kjv-text`")
    return text


# ---------------------------------------------------------------------------------------------
# Sampling

def generate(model, tokenizer, prompt, tokens=200, temperature=0.8, top_k=40, seed=0):
    """prompt continued by `tokens` sampled tokens. The global RNG is restored afterwards, so
    sampling during training changes nothing about the training run."""
    if temperature <= 0:
        raise ValueError(f"generate: temperature must be > 0, got {temperature}")
    device = model.transformer.wte.weight.device
    context = model.config.context
    ids = tokenizer.encode(prompt) or [ord("\n")]
    idx = rt.from_numpy(np.asarray([ids], dtype=np.int64)).to(device)
    saved = rt.get_rng_state()
    rt.manual_seed(seed)
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            for _ in range(tokens):
                logits = model(idx[:, -context:])[:, -1, :] / temperature
                if top_k:
                    kth = logits.topk(min(top_k, logits.shape[-1])).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = rt.softmax(logits, -1).multinomial(1)
                idx = rt.cat([idx, nxt], 1)
    finally:
        model.train(was_training)
        rt.set_rng_state(saved)
    return tokenizer.decode(idx[0].cpu())


# ---------------------------------------------------------------------------------------------
# The task the training loop drives

class LanguageModelTask:
    def __init__(self, args, config, tokenizer, text):
        self.device, self.config, self.tokenizer = args.device, config, tokenizer
        tokens = np.asarray(tokenizer.encode(text), dtype=np.int64)
        split = int(0.9 * len(tokens))
        self.train_tokens, self.val_tokens = tokens[:split], tokens[split:]
        T = config.context
        # One sample = one window of T + 1 tokens; an epoch visits every non-overlapping window once.
        self.train_size = (len(self.train_tokens) - 1) // T
        self.val_starts = np.arange(0, len(self.val_tokens) - T - 1, T)[:args.eval_batches * args.batch_size]
        self.batch_size, self.clip = args.batch_size, args.clip
        self.unit, self.units_per_step = "tok", args.batch_size * T
        self.sample_tokens, self.prompt, self.seed = args.sample_tokens, args.prompt, args.seed

    def _batch(self, tokens, starts):
        T = self.config.context
        windows = tokens[np.asarray(starts)[:, None] + np.arange(T + 1)[None, :]]
        return rt.from_numpy(np.ascontiguousarray(windows)).to(self.device)

    def train_batch(self, indices):
        return self._batch(self.train_tokens, np.asarray(indices) * self.config.context)

    def loss(self, model, windows):
        """windows: [B, T + 1] tokens; each predicts its next token (the slicing is part of the step)."""
        x, y = windows[:, :-1], windows[:, 1:]
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))

    def before_step(self, model):
        nn.utils.clip_grad_norm_(model.parameters(), self.clip)

    def evaluate(self, model):
        total, count = 0.0, 0
        for start in range(0, len(self.val_starts), self.batch_size):
            starts = self.val_starts[start:start + self.batch_size]
            total += self.loss(model, self._batch(self.val_tokens, starts)).item() * len(starts)
            count += len(starts)
        loss = total / max(1, count)
        sample = generate(model, self.tokenizer, self.prompt, self.sample_tokens, seed=self.seed)
        return {"metrics": {"loss": loss, "perplexity": math.exp(min(loss, 50.0))}, "sample": sample}


def make_optimizer(model, args):
    """AdamW (GPT-2's betas); its fused implementation on the GPU."""
    return optim.AdamW(parameter_groups(model, args.weight_decay), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                       fused=rt.device(args.device).type == "cuda")


def config_from_args(args):
    preset = PRESETS[args.preset]
    overrides = {k: getattr(args, k) for k in ("layers", "heads", "embd", "context", "vocab", "dropout")
                 if getattr(args, k) is not None}
    config = GPTConfig(**{**asdict(preset), **overrides})
    if config.embd % config.heads:
        raise ValueError(f"gpt: --embd {config.embd} is not divisible by --heads {config.heads}")
    if config.vocab <= 256:
        raise ValueError(f"gpt: --vocab must exceed the 256 byte tokens, got {config.vocab}")
    return config


def train_tokenizer(text, vocab):
    """A BPE with up to `vocab` tokens (fewer when the text has no more pairs to merge)."""
    return BPETokenizer.train(text, vocab_size=vocab)


def save_run_description(files, config, tokenizer):
    files.write_text("model.json", json.dumps(asdict(config), indent=2) + "\n")
    files.write_text("tokenizer.bpe", tokenizer.to_str())


def load_run(directory, device):
    """(model, tokenizer) of a saved run: the newest checkpoint's weights."""
    from . import checkpoint

    path = checkpoint.latest(directory)
    if path is None:
        raise FileNotFoundError(f"gpt --generate: no checkpoint in {directory}; train one with "
                                f"`rtx-train gpt --out {directory}`")
    with open(f"{directory}/model.json") as f:
        config = GPTConfig(**json.load(f))
    with open(f"{directory}/tokenizer.bpe") as f:
        tokenizer = BPETokenizer.from_str(f.read())
    model = GPT(config).to(device)
    tensors = io.load_file(path)
    model.load_state_dict({k[len("model."):]: v.to(device) for k, v in tensors.items() if k.startswith("model.")})
    return model, tokenizer
