"""Fashion-MNIST tasks: an MLP (784-512-256-10) and a small CNN (two conv-BN-ReLU-pool stages, then
a two-layer classifier), trained with Adam and cosine decay, evaluated on the 10k test images with
accuracy and a confusion matrix."""
import os

import numpy as np

import rustytorch as rt
from .. import io, nn
from ..nn import functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
_MEAN, _STD = 0.2860, 0.3530


def load_split(data_dir, train):
    """(images as float [N, 1, 28, 28] normalized, labels int64 [N]) of one split."""
    prefix = "train" if train else "t10k"
    paths = [os.path.join(data_dir, f"{prefix}-{kind}-idx{rank}-ubyte.gz") for kind, rank in (("images", 3), ("labels", 1))]
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Fashion-MNIST: {path} is missing; install the dataset with "
                                    f"`sudo apt-get install dataset-fashion-mnist` (or pass --data-dir)")
    images, labels = io.read_idx(paths[0]), io.read_idx(paths[1])
    if images.ndim != 3 or tuple(images.shape[1:]) != (28, 28) or labels.shape[0] != images.shape[0]:
        raise rt.CheckpointError(f"Fashion-MNIST in {data_dir}: images {list(images.shape)} and labels "
                                 f"{list(labels.shape)} do not fit together; reinstall with "
                                 f"`sudo apt-get install --reinstall dataset-fashion-mnist`")
    return ((images.float() / 255.0 - _MEAN) / _STD).unsqueeze(1), labels.long()


def mlp(nn=nn, dropout=0.2):
    """The MLP, built from `nn` (rustytorch's, or torch.nn for a side-by-side benchmark)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(512, 256), nn.ReLU(), nn.Dropout(dropout), nn.Linear(256, 10))


def cnn(nn=nn, dropout=0.25):
    """The CNN, built from `nn` (rustytorch's, or torch.nn for a side-by-side benchmark)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(dropout), nn.Linear(128, 10))


class ClassificationTask:
    def __init__(self, args):
        self.device = args.device
        self.x_train, self.y_train = (t.to(args.device) for t in load_split(args.data_dir, train=True))
        self.x_test, self.y_test = (t.to(args.device) for t in load_split(args.data_dir, train=False))
        self.train_size = self.x_train.shape[0]
        self.unit, self.units_per_step = "img", args.batch_size

    def train_batch(self, indices):
        return rt.from_numpy(np.ascontiguousarray(indices, dtype=np.int64)).to(self.device)

    def loss(self, model, index):
        """index: the batch's positions in the training set; the gather is part of the step (and of its
        CUDA graph with --cuda-graph)."""
        x, y = self.x_train.index_select(0, index), self.y_train.index_select(0, index)
        return F.cross_entropy(model(x), y)

    def before_step(self, model):
        pass

    def evaluate(self, model, batch_size=1000):
        total_loss, correct = 0.0, 0
        confusion = np.zeros((10, 10), dtype=np.int64)
        n = self.x_test.shape[0]
        for start in range(0, n, batch_size):
            x, y = self.x_test[start:start + batch_size], self.y_test[start:start + batch_size]
            logits = model(x)
            total_loss += F.cross_entropy(logits, y, reduction="sum").item()
            predicted = logits.argmax(1).cpu().numpy()
            truth = y.cpu().numpy()
            correct += int((predicted == truth).sum())
            np.add.at(confusion, (truth, predicted), 1)
        return {"metrics": {"loss": total_loss / n, "accuracy": correct / n}, "confusion": confusion}


def confusion_table(confusion):
    """The confusion matrix as text: rows are the true classes, columns the predicted ones."""
    width = max(len(c) for c in CLASSES)
    lines = [" " * width + "  " + " ".join(f"{i:>5d}" for i in range(10))]
    for i, name in enumerate(CLASSES):
        lines.append(f"{name:>{width}s}  " + " ".join(f"{v:>5d}" for v in confusion[i])
                     + f"   {100 * confusion[i, i] / max(1, confusion[i].sum()):5.1f}%")
    return "\n".join(lines)
