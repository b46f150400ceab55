"""The training loop the trainers share: a step counter drives everything (the epoch, the position
in the epoch's shuffled order, the learning rate), so a run restored from a checkpoint continues
with exactly the batches, dropout masks and updates the uninterrupted run would have used.
Ctrl-C finishes the current step, saves a checkpoint and exits. The forward and the loss run under
the run's autocast and the backward through its GradScaler (precision.py), which the checkpoints
also hold. With --cuda-graph the step runs as one CUDA graph after three eager warm-up steps (the
learning rate in device tensors). Under rtx-run (distributed.py) each rank trains on its part of
every global batch, the logged losses are the means over the ranks, and rank 0 alone evaluates,
writes and shows progress."""
import math
import signal
import time

import numpy as np

import rustytorch as rt
from .. import no_grad
from . import checkpoint
from .distributed import Group, unwrapped
from .progress import Progress


def warmup_cosine(step, peak, warmup, total, floor=0.0):
    """Learning rate at step: linear warm-up to peak over `warmup` steps, then cosine decay to
    floor * peak at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def epoch_order(seed, epoch, n):
    """The shuffled sample order of one epoch, a function of (seed, epoch) only."""
    return np.random.default_rng([seed, epoch]).permutation(n)


class Interrupt:
    """SIGINT sets a flag that the loop checks between steps; a second Ctrl-C stops at once."""

    def __init__(self):
        self.requested = False

    def __enter__(self):
        self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)


def fit(args, files, model, optimizer, task, total_steps, steps_per_epoch, lr_at, precision, group=None):
    """Trains model on task (vision.py, gpt.py) for total_steps optimizer steps at lr_at(step), in
    precision (a precision.Precision). With a distributed group (distributed.Group) model is the
    DistributedDataParallel wrapper, and files (the RunFiles) is None on every rank but 0; the result
    is rank 0's evaluation (None on the other ranks)."""
    group = group or Group(device=args.device)
    module = unwrapped(model)  # what is evaluated and saved
    scaler = precision.scaler
    step, elapsed = 0, 0.0
    window_losses = []  # the losses since the last metrics row, whose mean the row reports
    if args.resume:
        path = checkpoint.latest(args.out)
        if path is None:
            raise FileNotFoundError(f"--resume: no checkpoint in {args.out}")
        progress = checkpoint.load(path, module, optimizer, scaler)
        step, elapsed = progress["step"], progress.get("time", 0.0)
        window_losses = progress.get("window_losses", [])
        if group.is_main:
            files.keep_until(step)
        print(f"resumed from {path} at step {step}", flush=True)
    bar = Progress(total_steps, initial=step, every=args.log_every, enabled=group.is_main)
    order_epoch, order = None, None
    window_time, window_samples, throughput = 0.0, 0, 0.0  # training steps only, not evaluation
    rate = f"{task.unit}/s"
    last_eval = None

    def evaluate():
        """Rank 0 evaluates the whole validation set; the other ranks go on to the next step."""
        if not group.is_main:
            return None
        with no_grad(), precision.autocast():
            module.eval()
            return task.evaluate(module)

    def save():
        """Every rank takes part (the window's losses are averaged over the ranks); rank 0 writes."""
        progress = {"step": step, "time": elapsed, "window_losses": group.mean(window_losses)}
        if not group.is_main:
            return None
        return checkpoint.save(args.out, step, module, optimizer, progress, keep=args.keep, scaler=scaler)

    def train_step(batch):
        """Forward, loss, backward, clipping and the optimizer step; the loss stays on the device."""
        with precision.autocast():
            loss = task.loss(model, batch)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # so that gradient clipping sees the true gradients
        task.before_step(model)
        scaler.step(optimizer)  # skipped when fp16 gradients overflowed
        scaler.update()
        return loss

    run_step = graphed(train_step, args, optimizer, group) if args.cuda_graph else train_step
    outside, replays = 0, 0  # with --cuda-graph: kernels the replayed steps launched outside the graph
    with Interrupt() as interrupt:
        while step < total_steps:
            t0 = time.perf_counter()
            launches = rt.cuda.kernel_launches() if args.cuda_graph else 0
            epoch, index = divmod(step, steps_per_epoch)
            if epoch != order_epoch:
                order_epoch, order = epoch, group.part(epoch_order(args.seed, epoch, task.train_size))
            batch = task.train_batch(order[index * args.batch_size:(index + 1) * args.batch_size])
            lr = lr_at(step)
            for param_group in optimizer.param_groups:
                if isinstance(param_group["lr"], rt.Tensor):  # a copy from the host, not a kernel launch
                    param_group["lr"].copy_(rt.tensor(lr, dtype=rt.float64))
                else:
                    param_group["lr"] = lr
            model.train()
            loss_value = run_step(batch).item()
            if args.cuda_graph and run_step.calls > run_step.warmup + 1:  # a replay, not the capture
                outside += rt.cuda.kernel_launches() - launches
                replays += 1
            step += 1
            step_time = time.perf_counter() - t0
            elapsed += step_time
            window_time += step_time
            window_samples += task.units_per_step * group.world_size
            window_losses.append(loss_value)
            if step % args.log_every == 0 or step == total_steps:
                throughput = window_samples / max(window_time, 1e-9)
                (window_loss,) = group.mean([sum(window_losses) / len(window_losses)])
                if group.is_main:
                    files.log(split="train", step=step, epoch=epoch, loss=window_loss, lr=lr,
                              throughput=round(throughput, 1), unit=rate, time=round(elapsed, 3),
                              dtype=precision.name)
                window_time, window_samples, window_losses = 0.0, 0, []
            bar.update(step, loss=loss_value, lr=lr, **{rate: round(throughput)})
            end_of_epoch = step % steps_per_epoch == 0
            if (args.eval_every and step % args.eval_every == 0) or end_of_epoch or step == total_steps:
                last_eval = evaluate()
                if group.is_main:
                    files.log(split="eval", step=step, epoch=epoch, **last_eval["metrics"], dtype=precision.name)
                    bar.write(f"step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in last_eval["metrics"].items()))
                    if "sample" in last_eval:
                        bar.write(last_eval["sample"])
                    files.plot()
            if (args.checkpoint_every and step % args.checkpoint_every == 0) or end_of_epoch or step == total_steps:
                save()
            if group.any(interrupt.requested):  # every rank stops after the same step
                path = save()
                bar.close()
                print(f"interrupted at step {step}: saved {path}; continue with --resume", flush=True)
                raise SystemExit(130)
    bar.close()
    if replays:
        graph_kernels, per_step = run_step.graph.kernel_count, outside / replays
        print(f"cuda graph: {graph_kernels} kernels replayed per step, {per_step:.1f} launched outside it: "
              f"{100 * graph_kernels / (graph_kernels + per_step):.1f}% of the step's kernels ran from the graph",
              flush=True)
    return last_eval if last_eval is not None else evaluate()  # resumed from the final checkpoint


def graphed(train_step, args, optimizer, group):
    """train_step as one CUDA graph (rt.cuda.graphed_step: three eager warm-up steps, then replays),
    with each group's learning rate in a device tensor that the loop fills before each step."""
    if rt.device(args.device).type != "cuda":
        raise ValueError(f"--cuda-graph captures the step on a GPU: it needs --device cuda, got {args.device}")
    if group.distributed:
        raise ValueError("--cuda-graph runs in one process: a captured step cannot run DistributedDataParallel's "
                         "gradient all-reduce; leave out --cuda-graph under rtx-run")
    for param_group in optimizer.param_groups:
        if not (param_group.get("fused") or param_group.get("capturable")):
            raise ValueError("--cuda-graph needs a fused or capturable optimizer (its step counts on the device)")
        param_group["lr"] = rt.tensor(float(param_group["lr"]), dtype=rt.float64, device=args.device)
    return rt.cuda.graphed_step(train_step)


def seed_everything(args):
    rt.manual_seed(args.seed)
    rt.use_deterministic_algorithms(bool(args.deterministic))
