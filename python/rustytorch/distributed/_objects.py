"""The object collectives of torch.distributed (all_gather_object, broadcast_object_list,
gather_object, scatter_object_list): Python objects pickled into uint8 tensors and moved by the
tensor collectives of the C++ layer. The tensors live on the CPU, or on the current CUDA device for a
group that is nccl only."""
import pickle

import rustytorch as rt

from .. import _C


def _device(pg):
    return rt.device("cuda", rt.cuda.current_device()) if pg.name() == "nccl" else rt.device("cpu")


def _to_tensor(obj, device):
    data = rt.frombuffer(bytearray(pickle.dumps(obj)), dtype=rt.uint8)
    return data.to(device), rt.tensor([data.numel()], dtype=rt.int64).to(device)


def _from_tensor(t, size):
    return pickle.loads(bytes(t[:size].cpu().numpy().tobytes()))


def all_gather_object(pg, object_list, obj):
    """object_list[r] = rank r's obj, on every rank."""
    world = pg.size()
    if len(object_list) != world:
        raise _C.ValueError(f"[all_gather_object] object_list has {len(object_list)} entries, the group has "
                            f"{world} ranks")
    device = _device(pg)
    data, size = _to_tensor(obj, device)
    sizes = [rt.zeros(1, dtype=rt.int64, device=device) for _ in range(world)]
    pg.all_gather(sizes, size).wait()
    sizes = [int(s.item()) for s in sizes]
    longest = max(sizes)
    padded = rt.zeros(longest, dtype=rt.uint8, device=device)
    padded[:data.numel()] = data
    parts = [rt.zeros(longest, dtype=rt.uint8, device=device) for _ in range(world)]
    pg.all_gather(parts, padded).wait()
    for r in range(world):
        object_list[r] = _from_tensor(parts[r], sizes[r])


def broadcast_object_list(pg, object_list, src):
    """Every rank's object_list gets src's objects (the lists must have the same length)."""
    device = _device(pg)
    if pg.rank() == src:
        pieces = [_to_tensor(o, device) for o in object_list]
        sizes = rt.cat([s for _, s in pieces]) if pieces else rt.zeros(0, dtype=rt.int64, device=device)
    else:
        sizes = rt.zeros(len(object_list), dtype=rt.int64, device=device)
    pg.broadcast(sizes, src).wait()
    counts = sizes.cpu().tolist()
    if pg.rank() == src:
        data = rt.cat([d for d, _ in pieces]) if pieces else rt.zeros(0, dtype=rt.uint8, device=device)
    else:
        data = rt.zeros(sum(counts), dtype=rt.uint8, device=device)
    pg.broadcast(data, src).wait()
    if pg.rank() != src:
        offset = 0
        for i, n in enumerate(counts):
            object_list[i] = _from_tensor(data[offset:offset + n], n)
            offset += n
