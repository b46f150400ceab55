"""Progress display: a tqdm bar with loss and throughput on a terminal, else a plain line every
`every` steps (logs and CI stay readable)."""
import sys


class Progress:
    """enabled=False (the ranks but 0 of a distributed run) shows nothing."""

    def __init__(self, total, initial=0, every=100, description="train", enabled=True):
        self.every, self.description, self.total, self.enabled = every, description, total, enabled
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=initial, desc=description, unit="step", dynamic_ncols=True)

    def update(self, step, **fields):
        if self.bar is not None:
            self.bar.set_postfix({k: _short(v) for k, v in fields.items()}, refresh=False)
            self.bar.update(1)
        elif self.enabled and (step % self.every == 0 or step == self.total):
            print(f"{self.description} step {step}/{self.total} "
                  + " ".join(f"{k} {_short(v)}" for k, v in fields.items()), flush=True)

    def write(self, line):
        if self.bar is not None:
            self.bar.write(line)
        elif self.enabled:
            print(line, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _short(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)
