"""The classes whose saved objects rustytorch.load rebuilds, in its own checkpoints and in PyTorch's
(torch.serialization's add_safe_globals, get_safe_globals, clear_safe_globals and safe_globals).
Loading never imports anything by a name read from a file: a saved object's class is found only
here, among the classes the program itself marked as trusted, so a checkpoint holding a config
dataclass or an argparse.Namespace loads once its class is added, and any other raises."""

_trusted = {}  # "module.qualname" -> class


def class_name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def find(name):
    """The trusted class saved under name, or None."""
    return _trusted.get(name)


def add_safe_globals(safe_globals):
    """Marks classes as trusted, so that rustytorch.load rebuilds their objects: each entry is a class
    or a (class, "module.qualname") pair naming where a file saved it from."""
    for entry in safe_globals:
        cls, name = entry if isinstance(entry, tuple) and len(entry) == 2 else (entry, None)
        if not isinstance(cls, type):
            raise TypeError(f"add_safe_globals: {cls!r} is not a class; rustytorch rebuilds objects of trusted "
                            "classes only (it never calls functions named in a file)")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"add_safe_globals: the name paired with {class_name(cls)} must be a str, got {name!r}")
        _trusted[name or class_name(cls)] = cls


def get_safe_globals():
    """The trusted classes."""
    return list(_trusted.values())


def clear_safe_globals():
    """Forgets every trusted class."""
    _trusted.clear()


class safe_globals:
    """`with safe_globals([Config]):` trusts the classes inside the block only."""

    def __init__(self, safe_globals):
        self._globals = list(safe_globals)
        self._before = None

    def __enter__(self):
        self._before = dict(_trusted)
        add_safe_globals(self._globals)
        return self

    def __exit__(self, *exc):
        _trusted.clear()
        _trusted.update(self._before)
        return False
