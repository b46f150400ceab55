"""rustytorch.cuda's seeding and generator-state functions, as scripts call them
(`torch.cuda.manual_seed_all(seed)`, `torch.cuda.get_rng_state()` in checkpoints). rustytorch has one
generator for every device (docs/pytorch_differences.md), so each of these reads or sets that
generator, and so do rustytorch.manual_seed and its kin; they work without a GPU, as PyTorch's
seeding does."""
from .. import _C


def manual_seed(seed):
    """Seeds the generator that CUDA ops use (the one every device shares)."""
    _C.manual_seed(seed)


manual_seed_all = manual_seed


def seed():
    """Seeds the generator that CUDA ops use with a non-deterministic number."""
    _C.seed()


seed_all = seed


def initial_seed():
    """The seed the generator that CUDA ops use was last seeded with."""
    return _C.initial_seed()


def get_rng_state(device="cuda"):
    """The state of the generator that CUDA ops use, as `rustytorch.get_rng_state()` gives it."""
    return _C.get_rng_state()


def set_rng_state(new_state, device="cuda"):
    """Restores a state from get_rng_state."""
    _C.set_rng_state(new_state)


def get_rng_state_all():
    """One state per GPU (each the shared generator's; one entry where there is no GPU)."""
    return [get_rng_state() for _ in range(max(_C._cuda.device_count(), 1))]


def set_rng_state_all(new_states):
    """Restores each state of get_rng_state_all in turn (the shared generator keeps the last)."""
    for state in new_states:
        set_rng_state(state)
