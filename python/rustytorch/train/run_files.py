"""A run's output directory: config.json, metrics.jsonl (one JSON object per line) and plot.png.
On resume the metrics rows written after the restored step are dropped, so the file reads as one
uninterrupted run."""
import glob
import json
import os

from ..io import write_atomically


class RunFiles:
    def __init__(self, directory, config, resume=False):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        for stale in glob.glob(os.path.join(directory, ".tmp-*")):  # left by a run killed while writing
            os.remove(stale)
        self.metrics_path = os.path.join(directory, "metrics.jsonl")
        self.plot_path = os.path.join(directory, "plot.png")
        write_atomically(os.path.join(directory, "config.json"),
                          lambda f: f.write(json.dumps(config, indent=2, sort_keys=True).encode() + b"\n"))
        if not resume:
            self.keep_until(0)

    def keep_until(self, step):
        """Drops the metrics rows after step (those of a run interrupted after its last checkpoint)."""
        kept = [r for r in self.rows() if r["step"] <= step]
        write_atomically(self.metrics_path, lambda f: f.write("".join(json.dumps(r) + "\n" for r in kept).encode()))

    def write_text(self, name, text):
        write_atomically(os.path.join(self.directory, name), lambda f: f.write(text.encode()))

    def rows(self):
        if not os.path.exists(self.metrics_path):
            return []
        with open(self.metrics_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def log(self, **row):
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def plot(self):
        """Train loss and, where evaluated, eval loss and accuracy against the step."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = self.rows()
        train = [r for r in rows if r.get("split") == "train"]
        evals = [r for r in rows if r.get("split") == "eval"]
        has_accuracy = any("accuracy" in r for r in evals)
        fig, axes = plt.subplots(1, 2 if has_accuracy else 1, figsize=(11 if has_accuracy else 6, 4), squeeze=False)
        ax = axes[0][0]
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train", linewidth=1)
        if evals:
            ax.plot([r["step"] for r in evals], [r["loss"] for r in evals], "o-", label="eval")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
        ax.grid(alpha=0.3)
        if has_accuracy:
            ax = axes[0][1]
            ax.plot([r["step"] for r in evals], [100 * r["accuracy"] for r in evals], "o-", color="C1")
            ax.set_xlabel("step")
            ax.set_ylabel("eval accuracy (%)")
            ax.grid(alpha=0.3)
        fig.tight_layout()
        write_atomically(self.plot_path, lambda f: fig.savefig(f, format="png", dpi=100))
        plt.close(fig)
