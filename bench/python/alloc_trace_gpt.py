"""Writes a CUDA caching-allocator trace (the format of RTX_CUDA_ALLOC_TRACE, docs/allocator.md) of
rustytorch training a GPT-2 (python/rustytorch/train/gpt.py, fp32) for a number of steps whose batch B
and context T are drawn from those of the allocator-churn benchmark (bench/python/compare/training.py;
with Python's random, so pass --shapes for the benchmark's own sequence): the model's
parameters, every forward activation and saved tensor, the loss, every backward temporary and gradient,
clip_grad_norm_'s scalars and AdamW's state, allocated and freed in the order the library's ops and
autograd engine do it, with the scratch buffers of its CUDA kernels. The sizes are what the library
requests; the addresses are made up. Replay it with `rtx_alloc_replay TRACE --breakdown` to study the
allocator without a GPU; a trace recorded on the GPU replaces it where one is at hand.

    python bench/python/alloc_trace_gpt.py --out gpt2.trace                 # GPT-2 124M, 200 steps
    python bench/python/alloc_trace_gpt.py --out small.trace --steps 6 --layers 2
    python bench/python/alloc_trace_gpt.py --out fixed.trace --shapes 8:1024,1:256,4:512

Only the standard library is used, so any python3 runs it.
"""
import argparse
import random
import sys

F32, I64 = 4, 8
SCALAR = F32
WORKSPACE = 32 << 20      # cuBLASLt's workspace, allocated at the first matmul and kept
HEADER = ("rtx-alloc-trace 1 min_block_size=512 small_size=1048576 small_buffer=2097152 min_large_alloc=10485760 "
          "large_buffer=20971520 round_large=2097152 huge_segment=1073741824 huge_split=4 max_split_size=none "
          "garbage_collection_threshold=0 device_total={}\n")


class Trace:
    """Trace lines of allocations and frees on one stream; an allocation returns a made-up address."""

    def __init__(self, out, device_total):
        self.out, self.next, self.stream = out, 1 << 32, 0x1000
        out.write(HEADER.format(device_total))

    def alloc(self, nbytes):
        address = self.next
        self.next += 512
        self.out.write(f"a {nbytes} {self.stream:x} {address:x}\n")
        return address

    def free(self, *addresses):
        for a in addresses:
            self.out.write(f"f {a:x}\n")

    def transient(self, *sizes):
        """A kernel's scratch buffers: allocated in order, freed in reverse order when the kernel returns."""
        self.free(*reversed([self.alloc(n) for n in sizes]))

    def event(self, op):
        self.out.write(op + "\n")


class Shape:
    """The model's sizes, its parameters in order and AdamW's groups."""

    def __init__(self, args):
        self.L, self.H, self.C, self.V, self.context = args.layers, args.heads, args.embd, args.vocab, args.context
        C = self.C
        # Parameters in the order of named_parameters(), as (name, bytes).
        self.params = [("wte", self.V * C * F32), ("wpe", self.context * C * F32)]
        for i in range(self.L):
            for name, n in (("ln_1.weight", C), ("ln_1.bias", C), ("attn.c_attn.weight", 3 * C * C),
                            ("attn.c_attn.bias", 3 * C), ("attn.c_proj.weight", C * C), ("attn.c_proj.bias", C),
                            ("ln_2.weight", C), ("ln_2.bias", C), ("mlp.c_fc.weight", 4 * C * C),
                            ("mlp.c_fc.bias", 4 * C), ("mlp.c_proj.weight", 4 * C * C), ("mlp.c_proj.bias", C)):
                self.params.append((f"h.{i}.{name}", n * F32))
        self.params += [("ln_f.weight", C * F32), ("ln_f.bias", C * F32)]
        # AdamW's groups (gpt.parameter_groups): matrices first, then vectors.
        self.groups = ([n for n, _ in self.params if n in ("wte", "wpe") or n.endswith(("c_attn.weight",
                        "c_proj.weight", "c_fc.weight"))])
        self.groups += [n for n, _ in self.params if n not in self.groups]
        self.size = dict(self.params)


class Model:
    """The allocator's view of one GPT, its AdamW and its gradients."""

    def __init__(self, trace, shape):
        self.t, self.s = trace, shape
        self.grads, self.state, self.workspace = {}, {}, None
        # model.to("cuda") (the parameters live as long as the run), then the state dict loaded from host
        # copies (gpt_models in the benchmark).
        self.params = {name: trace.alloc(n) for name, n in shape.params}
        copies = [trace.alloc(n) for _, n in shape.params]
        trace.free(*copies)

    def matmul(self, out_bytes):
        if self.workspace is None:
            self.workspace = self.t.alloc(WORKSPACE)
        return self.t.alloc(out_bytes)

    def linear(self, rows, out_features):
        """x @ W.t() + b: the product, then the bias added into a new tensor (the product is freed)."""
        product = self.matmul(rows * out_features * F32)
        out = self.t.alloc(rows * out_features * F32)
        self.t.free(product)
        return out

    def layer_norm(self, rows):
        return self.t.alloc(rows * self.s.C * F32), self.t.alloc(rows * F32), self.t.alloc(rows * F32)

    def grad(self, name, address):
        self.grads[name] = address

    def step(self, B, T):
        """One training step: forward, loss, zero_grad, backward, clip_grad_norm_, AdamW."""
        t, s = self.t, self.s
        C, N = s.C, B * T
        act = N * C * F32
        # ---- forward
        idx = t.alloc(N * I64)                     # the input indices made contiguous, kept for the backward
        t.transient(2 * 256 * I64)                 # the indices' bounds check
        tok = t.alloc(act)                         # wte(idx)
        x = t.alloc(act)                           # + wpe[:T]
        t.free(tok)
        layers = []
        for _ in range(s.L):
            ln1 = self.layer_norm(N)
            qkv = self.linear(N, 3 * C)
            y, lse = t.alloc(act), t.alloc(B * s.H * T * F32)  # attention output [B, T, H, D] and log-sum-exp
            proj = self.linear(N, C)
            x1 = t.alloc(act)
            t.free(proj)
            ln2 = self.layer_norm(N)
            fc = self.linear(N, 4 * C)
            gelu = t.alloc(4 * act)
            proj2 = self.linear(N, C)
            x2 = t.alloc(act)
            t.free(proj2)
            layers.append((x, ln1, qkv, y, lse, x1, ln2, fc, gelu))
            x = x2
        lnf = self.layer_norm(N)
        logits = self.matmul(N * s.V * F32)        # linear(ln_f(x), wte): no bias
        # ---- loss: cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        target = t.alloc(N * I64)
        loss, total_weight, ce_lse = t.alloc(SCALAR), t.alloc(SCALAR), t.alloc(N * F32)
        t.transient(N * 8, 1024 * 16)              # per-sample losses (float64) and per-block partial sums
        # ---- zero_grad(set_to_none=True), group by group
        for name in s.groups:
            if name in self.grads:
                t.free(self.grads.pop(name))
        # ---- backward
        ones = t.alloc(SCALAR)
        g_logits = t.alloc(N * s.V * F32)
        t.free(target, ce_lse, total_weight)
        g = t.alloc(act)                           # g_logits @ wte
        g_wte_head = t.alloc(s.size["wte"])        # g_logits^T @ ln_f(x), kept until the embedding's part arrives
        t.free(lnf[0], g_logits)
        g = self.layer_norm_backward(N, g, x, lnf, "ln_f")
        for i in reversed(range(s.L)):
            xin, ln1, qkv, y, lse, x1, ln2, fc, gelu = layers[i]
            p = f"h.{i}."
            # mlp.c_proj: bias, input and weight gradients
            self.grad(p + "mlp.c_proj.bias", t.alloc(C * F32))
            g_gelu = t.alloc(4 * act)
            self.weight_grad(p + "mlp.c_proj.weight")
            g_fc = t.alloc(4 * act)                # GELU backward
            t.free(fc, gelu, g_gelu)
            self.grad(p + "mlp.c_fc.bias", t.alloc(4 * C * F32))
            g_ln2 = t.alloc(act)
            tmp = t.alloc(s.size[p + "mlp.c_fc.weight"])
            t.free(ln2[0], g_fc)
            self.grad(p + "mlp.c_fc.weight", t.alloc(s.size[p + "mlp.c_fc.weight"]))
            t.free(tmp)
            g_x1 = self.layer_norm_backward(N, None, x1, ln2, p + "ln_2")
            total = t.alloc(act)                   # the residual's two gradients summed
            t.free(g, g_x1, g_ln2)
            g = total
            # attention
            self.grad(p + "attn.c_proj.bias", t.alloc(C * F32))
            g_y = t.alloc(act)
            self.weight_grad(p + "attn.c_proj.weight")
            t.transient(B * s.H * T * F32)         # the attention backward's row sums of dO * O
            dq, dk, dv = t.alloc(act), t.alloc(act), t.alloc(act)
            t.free(qkv, y, lse, g_y)
            # split's backward: each part padded to [N, 3C], then summed
            acc = t.alloc(3 * act)
            t.free(dv)
            part = t.alloc(3 * act)
            total3 = t.alloc(3 * act)
            t.free(acc, part, dk)
            part = t.alloc(3 * act)
            g_qkv = t.alloc(3 * act)
            t.free(total3, part, dq)
            self.grad(p + "attn.c_attn.bias", t.alloc(3 * C * F32))
            g_ln1 = t.alloc(act)
            tmp = t.alloc(s.size[p + "attn.c_attn.weight"])
            t.free(ln1[0], g_qkv)
            self.grad(p + "attn.c_attn.weight", t.alloc(s.size[p + "attn.c_attn.weight"]))
            t.free(tmp)
            g_xin = self.layer_norm_backward(N, None, xin, ln1, p + "ln_1")
            total = t.alloc(act)
            t.free(g, g_xin, g_ln1)
            g = total
        g_wpe_rows = t.alloc(T * C * F32)          # the positions' gradient, summed over the batch
        t.transient(max(pow2_ceil(N), 2048) * I64)  # the embedding backward's sort keys
        g_wte_emb = t.alloc(s.size["wte"])
        t.free(idx)
        self.grad("wte", t.alloc(s.size["wte"]))
        t.free(g_wte_head, g_wte_emb, g)
        self.grad("wpe", t.alloc(s.size["wpe"]))   # wpe[:T]'s backward: zeros, then the rows
        t.free(g_wpe_rows, ones)
        # ---- clip_grad_norm_: one norm per gradient, their stack, the total and the clip coefficient
        norms = [t.alloc(SCALAR) for _ in s.params]
        stack = t.alloc(len(s.params) * F32)
        total_norm = t.alloc(SCALAR)
        t.free(stack)
        a, b = t.alloc(SCALAR), t.alloc(SCALAR)
        t.free(a)
        c, d = t.alloc(SCALAR), t.alloc(SCALAR)
        t.free(c)
        e = t.alloc(SCALAR)
        t.free(d, b, e, *norms, total_norm)
        # ---- AdamW: exp_avg and exp_avg_sq made at the first step, group by group
        for name in s.groups:
            if name not in self.state:
                self.state[name] = (t.alloc(s.size[name]), t.alloc(s.size[name]))
        return logits, loss

    def weight_grad(self, name):
        """A linear layer's weight gradient: the product, then its contiguous copy kept as .grad."""
        tmp = self.t.alloc(self.s.size[name])
        self.grad(name, self.t.alloc(self.s.size[name]))
        self.t.free(tmp)

    def layer_norm_backward(self, rows, g, x, saved, name):
        """LayerNorm's input gradient, weight and bias gradients (through per-chunk column sums); frees what
        the forward saved, and g when given. Returns the input gradient."""
        t, C = self.t, self.s.C
        dx = t.alloc(rows * C * F32)
        self.grad(name + ".weight", t.alloc(C * F32))
        self.grad(name + ".bias", t.alloc(C * F32))
        chunks = min(ceil_div(1024, ceil_div(C, 32)), ceil_div(rows, 8))  # the CUDA kernel's row chunks
        t.transient(ceil_div(rows, ceil_div(rows, chunks)) * C * 2 * F32)
        t.free(x, saved[1], saved[2])
        if g is not None:
            t.free(g)
        return dx


def ceil_div(a, b):
    return -(-a // b)


def pow2_ceil(n):
    return 1 << (n - 1).bit_length()


def parse_shapes(text):
    try:
        shapes = [tuple(int(v) for v in item.split(":")) for item in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 2 or min(s) < 1 for s in shapes):
        raise SystemExit(f"alloc_trace_gpt: --shapes must be B:T,B:T,... with positive B and T, got '{text}'")
    return shapes


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the trace file to write")
    p.add_argument("--steps", type=int, default=200, help="training steps (default 200, as the benchmark)")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--embd", type=int, default=768)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--batches", default="1,2,4,8", help="the batch sizes drawn from")
    p.add_argument("--context-divisors", default="8,4,2,1", help="T is drawn from context / each of these")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--shapes", help="B:T,B:T,... for the steps instead of random ones")
    p.add_argument("--device-total", type=int, default=0, help="device memory in bytes for the header (0: unknown)")
    args = p.parse_args(argv)
    if args.shapes:
        shapes = parse_shapes(args.shapes)
    else:
        rng = random.Random(args.seed)
        batches = [int(b) for b in args.batches.split(",")]
        contexts = [args.context // int(d) for d in args.context_divisors.split(",")]
        shapes = [(rng.choice(batches), rng.choice(contexts)) for _ in range(args.steps)]
    if shapes and max(T for _, T in shapes) > args.context:
        raise SystemExit(f"alloc_trace_gpt: a context in --shapes is above --context {args.context}")
    shape = Shape(args)
    with open(args.out, "w") as out:
        trace = Trace(out, args.device_total)
        model = Model(trace, shape)
        trace.event("e")                           # the benchmark empties the cache, then resets the peaks
        trace.event("p")
        tokens = None
        for B, T in shapes:
            new = trace.alloc(B * (T + 1) * I64)   # the step's tokens, then the previous step's are dropped
            if tokens is not None:
                trace.free(tokens)
            tokens = new
            logits, loss = model.step(B, T)
            trace.free(logits, loss)
        if tokens is not None:
            trace.free(tokens)
    print(f"alloc_trace_gpt: {len(shapes)} steps of {', '.join(f'{B}x{T}' for B, T in shapes[:8])}"
          f"{', ...' if len(shapes) > 8 else ''} written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
