"""utils.data: TensorDataset, DataLoader batching, seeded shuffling, drop_last and collation."""
import numpy as np
import pytest

import rustytorch as rt
from rustytorch.utils.data import DataLoader, Dataset, TensorDataset, default_collate


def test_tensor_dataset_and_in_order_batches():
    x, y = rt.arange(10).float().reshape(5, 2), rt.arange(5)
    ds = TensorDataset(x, y)
    assert len(ds) == 5 and ds[3][1].item() == 3
    batches = list(DataLoader(ds, batch_size=2))
    assert [b[1].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    assert batches[0][0].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert len(DataLoader(ds, batch_size=2)) == 3 and len(DataLoader(ds, batch_size=2, drop_last=True)) == 2
    assert [b[1].tolist() for b in DataLoader(ds, batch_size=2, drop_last=True)] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError):
        TensorDataset(rt.zeros(3), rt.zeros(4))


def test_shuffle_is_a_seeded_permutation():
    ds = TensorDataset(rt.arange(20))
    a = [b[0].tolist() for b in DataLoader(ds, batch_size=6, shuffle=True,
                                             generator=rt.Generator().manual_seed(5))]
    b = [b[0].tolist() for b in DataLoader(ds, batch_size=6, shuffle=True,
                                             generator=rt.Generator().manual_seed(5))]
    assert a == b and sorted(sum(a, [])) == list(range(20)) and sum(a, []) != list(range(20))
    rt.manual_seed(1)
    c = [b[0].tolist() for b in DataLoader(ds, batch_size=20, shuffle=True)]
    rt.manual_seed(1)
    d = [b[0].tolist() for b in DataLoader(ds, batch_size=20, shuffle=True)]
    assert c == d


class Pairs(Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        return {"x": rt.full((2,), float(i)), "label": i, "w": 0.5 * i, "pair": (np.ones(2) * i, True)}


def test_collate_of_dicts_numbers_and_arrays():
    batch = next(iter(DataLoader(Pairs(), batch_size=3)))
    assert batch["x"].shape == (3, 2) and batch["label"].dtype == rt.int64 and batch["w"].dtype == rt.float64
    assert batch["pair"][0].shape == (3, 2) and batch["pair"][1].dtype == rt.bool
    assert default_collate([(1, 2.0), (3, 4.0)])[0].tolist() == [1, 3]
