"""rtx-train: the bundled trainers.

    rtx-train cnn                      # Fashion-MNIST CNN (the default job; ~91% in 3 epochs)
    rtx-train mlp --epochs 10          # Fashion-MNIST MLP
    rtx-train gpt --preset cpu         # GPT on the King James Bible
    rtx-train gpt --dtype fp16         # autocast in float16 with a GradScaler (default: bf16 on GPUs)
    rtx-train gpt --generate "In the beginning" --out runs/gpt
    rtx-train cnn --resume             # continue runs/cnn from its newest checkpoint
    rtx-run --nproc-per-node 2 -m rustytorch.train cnn   # data-parallel; --batch-size is per process

Flags left out on --resume are taken from the run's config.json."""
import argparse
import json
import os
import sys
import time

import rustytorch as rt
from .. import cuda, optim
from . import distributed, gpt, vision
from .loop import fit, seed_everything, warmup_cosine
from .precision import AUTOCAST_DTYPES, Precision, default_dtype
from .run_files import RunFiles

#: Per-trainer defaults of the flags every trainer has.
DEFAULTS = {
    "mlp": dict(epochs=10, batch_size=128, lr=1e-3, dropout=0.2),
    "cnn": dict(epochs=3, batch_size=128, lr=1e-3, dropout=0.25),
    "gpt": dict(epochs=2, batch_size=16, lr=1e-3),
}
COMMON = dict(max_steps=None, seed=0, deterministic=False, eval_every=0, log_every=100, checkpoint_every=500,
              keep=3, data_dir=vision.DATA_DIR, cuda_graph=False)
GPT_DEFAULTS = dict(preset="cpu", weight_decay=0.1, clip=1.0, warmup=100, eval_batches=8, sample_tokens=200,
                    prompt="In the beginning", text=None, tokens=200, temperature=0.8, top_k=40)
#: Flags that say how to run, not what: never restored from a saved config.
_RUN_ONLY = {"resume", "out", "device", "generate", "command", "cuda_graph"}


def parser():
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("common options")
    g.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    g.add_argument("--epochs", type=int, help="passes over the training data (mlp 10, cnn 3, gpt 2)")
    g.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (with --epochs: whichever first)")
    g.add_argument("--batch-size", type=int, help="samples per step and process (mlp/cnn 128, gpt 16)")
    g.add_argument("--lr", type=float, help="peak learning rate, reached after warm-up (1e-3)")
    g.add_argument("--seed", type=int, help="seed of initialization, shuffling and dropout (0)")
    g.add_argument("--out", help="output directory for config, metrics, plot and checkpoints (runs/<trainer>)")
    g.add_argument("--resume", action="store_true", default=None, help="continue from the newest checkpoint in --out")
    g.add_argument("--deterministic", action="store_true", default=None,
                   help="bitwise reproducible kernels (on the CPU runs are reproducible anyway)")
    g.add_argument("--eval-every", type=int, help="evaluate every N steps as well as after each epoch (0: off)")
    g.add_argument("--log-every", type=int, help="metrics row (and progress line when not a terminal) every N steps (100)")
    g.add_argument("--checkpoint-every", type=int, help="checkpoint every N steps as well as after each epoch (500)")
    g.add_argument("--keep", type=int, help="checkpoints kept, newest first (3)")
    g.add_argument("--cuda-graph", action="store_true", default=None,
                   help="run each training step (forward, backward, clipping, optimizer step) as one captured CUDA "
                        "graph after three eager warm-up steps (GPU, one process)")

    top = argparse.ArgumentParser(
        prog="rtx-train", formatter_class=argparse.RawDescriptionHelpFormatter, description=__doc__.split("\n\n")[0],
        epilog="Each run writes config.json, metrics.jsonl, plot.png and checkpoint-<step>.safetensors into --out.\n"
               "Ctrl-C saves a checkpoint and exits; --resume continues bit for bit.\n\n" + __doc__.split("\n\n", 1)[1])
    sub = top.add_subparsers(dest="command", metavar="{mlp,cnn,gpt}", required=True)
    for name, help_text in (("mlp", "Fashion-MNIST, 784-512-256-10 MLP with dropout (Adam, cosine)"),
                            ("cnn", "Fashion-MNIST, two conv-BN-ReLU-pool stages and a classifier (Adam, cosine)")):
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.add_argument("--data-dir", help=f"Fashion-MNIST IDX files ({vision.DATA_DIR})")
        p.add_argument("--dropout", type=float, help=f"dropout probability ({DEFAULTS[name]['dropout']})")

    p = sub.add_parser("gpt", parents=[common], help="GPT-2-style model on the King James Bible (AdamW, cosine)",
                       description="GPT-2-style model on the King James Bible. Presets: " + "; ".join(
                           f"{k}: {v.layers} layers, {v.heads} heads, {v.embd} wide, context {v.context}, vocab {v.vocab}"
                           for k, v in gpt.PRESETS.items()))
    g = p.add_argument_group("model")
    g.add_argument("--preset", choices=sorted(gpt.PRESETS), help="model size (cpu)")
    for flag in ("layers", "heads", "embd", "context", "vocab"):
        g.add_argument(f"--{flag}", type=int, help="override the preset's " + flag)
    g.add_argument("--dropout", type=float, help="override the preset's dropout (0)")
    g = p.add_argument_group("training")
    g.add_argument("--weight-decay", type=float, help="AdamW decay of the weight matrices (0.1)")
    g.add_argument("--clip", type=float, help="global gradient-norm clip (1.0)")
    g.add_argument("--dtype", choices=list(AUTOCAST_DTYPES),
                   help="bf16, fp16: forward and loss under autocast in that dtype (fp16 with a GradScaler), "
                        "float32 parameters; fp32: float32 throughout (bf16 on GPUs of compute capability "
                        ">= 8.0, else fp32)")
    g.add_argument("--warmup", type=int, help="warm-up steps (100, at most a tenth of the run)")
    g.add_argument("--eval-batches", type=int, help="validation batches per evaluation (8)")
    g.add_argument("--text", help="train on this UTF-8 file instead of the King James Bible")
    g = p.add_argument_group("sampling")
    g.add_argument("--prompt", help="prompt of the sample printed at each evaluation ('In the beginning')")
    g.add_argument("--sample-tokens", type=int, help="length of that sample (200)")
    g.add_argument("--generate", metavar="PROMPT", help="sample from the run in --out instead of training")
    g.add_argument("--tokens", type=int, help="tokens to generate (200)")
    g.add_argument("--temperature", type=float, help="sampling temperature (0.8)")
    g.add_argument("--top-k", type=int, help="sample among the k likeliest tokens (40; 0: all)")
    return top


def resolve(args):
    """The run's settings: flags given, else (on --resume) the saved config, else the defaults."""
    given = {k: v for k, v in vars(args).items() if v is not None}
    given.setdefault("out", os.path.join("runs", args.command))
    saved = {}
    config_path = os.path.join(given["out"], "config.json")
    if args.resume and os.path.exists(config_path):
        with open(config_path) as f:
            saved = {k: v for k, v in json.load(f).items() if k not in _RUN_ONLY}
        if args.command == "gpt":
            saved.setdefault("dtype", "fp32")  # configs written before --dtype existed
            if given.get("dtype", saved["dtype"]) != saved["dtype"]:
                raise ValueError(f"--resume: the run in {given['out']} trains in {saved['dtype']}, so it cannot "
                                 f"continue in {given['dtype']} (its checkpoints hold that run's GradScaler and "
                                 f"updates); leave out --dtype, or start a new run with another --out")
    defaults = {**COMMON, **DEFAULTS[args.command], **(GPT_DEFAULTS if args.command == "gpt" else {})}
    merged = {**vars(args), **defaults, **saved, **given}
    if merged["device"] is None:
        merged["device"] = "cuda" if cuda.is_available() else "cpu"
    if args.command == "gpt" and merged["dtype"] is None:
        merged["dtype"] = default_dtype(merged["device"])
    merged["resume"] = bool(args.resume)
    return argparse.Namespace(**merged)


def _steps(args, group, train_size):
    """(steps per epoch, total steps) of a run whose steps take batch_size samples on each rank."""
    global_batch = args.batch_size * group.world_size
    steps_per_epoch = train_size // global_batch
    if steps_per_epoch == 0:
        on = f" x {group.world_size} processes" if group.distributed else ""
        raise ValueError(f"{args.command}: --batch-size {args.batch_size}{on} is larger than the training set "
                         f"({train_size} samples)")
    if group.distributed:
        processes = f"{group.world_size} process" + ("es" if group.world_size != 1 else "")
        print(f"{args.command}: {processes}, global batch {global_batch} "
              f"({args.batch_size} per process)", flush=True)
    total = args.epochs * steps_per_epoch
    return steps_per_epoch, (min(total, args.max_steps) if args.max_steps else total)


def _outputs(directory):
    names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    return f"outputs in {os.path.abspath(directory)}/: " + ", ".join(names)


def run_vision(args, group):
    model = (vision.mlp if args.command == "mlp" else vision.cnn)(dropout=args.dropout)
    print(f"{args.command}: {sum(p.numel() for p in model.parameters()):,} parameters on {args.device}", flush=True)
    model.to(args.device)
    task = vision.ClassificationTask(args)
    steps_per_epoch, total = _steps(args, group, task.train_size)
    model = group.wrap(model)
    optimizer = optim.Adam(model.parameters(), lr=args.lr, fused=rt.device(args.device).type == "cuda")
    files = RunFiles(args.out, _config(args), resume=args.resume) if group.is_main else None
    start = time.perf_counter()
    result = fit(args, files, model, optimizer, task, total, steps_per_epoch,
                 lr_at=lambda step: warmup_cosine(step, args.lr, min(100, total // 10), total),
                 precision=Precision("fp32", args.device), group=group)
    if not group.is_main:
        return
    metrics = result["metrics"]
    print(f"\ntest accuracy {100 * metrics['accuracy']:.2f}% (loss {metrics['loss']:.4f}) after {total} steps "
          f"({total / steps_per_epoch:.2f} epochs) in {time.perf_counter() - start:.0f} s")
    print("confusion matrix (rows: true class, columns: predicted; last column: recall)")
    print(vision.confusion_table(result["confusion"]))
    print(_outputs(args.out))


def run_gpt(args, group):
    if args.generate is not None:
        model, tokenizer = gpt.load_run(args.out, args.device)
        print(gpt.generate(model, tokenizer, args.generate, args.tokens, args.temperature, args.top_k, args.seed))
        return
    config = gpt.config_from_args(args)
    text = gpt.kjv_text(args.text)
    t0 = time.perf_counter()
    tokenizer = gpt.train_tokenizer(text, config.vocab)
    print(f"gpt: {len(text) / 1e6:.1f} MB of text, BPE of {tokenizer.vocab_size} tokens trained in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    precision = Precision(args.dtype, args.device)
    model = gpt.GPT(config)
    print(f"gpt: {sum(p.numel() for p in model.parameters()):,} parameters ({config.layers} layers, {config.heads} "
          f"heads, {config.embd} wide, context {config.context}) on {args.device} in {args.dtype}", flush=True)
    model.to(args.device)
    task = gpt.LanguageModelTask(args, config, tokenizer, text)
    steps_per_epoch, total = _steps(args, group, task.train_size)
    model = group.wrap(model)
    optimizer = gpt.make_optimizer(model, args)
    files = None
    if group.is_main:
        files = RunFiles(args.out, _config(args), resume=args.resume)
        gpt.save_run_description(files, config, tokenizer)
    start = time.perf_counter()
    result = fit(args, files, model, optimizer, task, total, steps_per_epoch,
                 lr_at=lambda step: warmup_cosine(step, args.lr, min(args.warmup, total // 10), total, floor=0.1),
                 precision=precision, group=group)
    if not group.is_main:
        return
    print(f"\nvalidation loss {result['metrics']['loss']:.4f} after {total} steps in "
          f"{time.perf_counter() - start:.0f} s")
    print(_outputs(args.out))
    print(f"sample more with: rtx-train gpt --generate \"In the beginning\" --out {args.out}")


def _config(args):
    return {k: v for k, v in vars(args).items() if k not in _RUN_ONLY}


def main(argv=None):
    parsed = parser().parse_args(argv)
    try:
        args = resolve(parsed)
        group = distributed.setup(args)
        seed_everything(args)
        (run_gpt if args.command == "gpt" else run_vision)(args, group)
        group.close()
    except (FileNotFoundError, ValueError, rt.Error) as e:
        print(f"rtx-train {parsed.command}: {e}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
