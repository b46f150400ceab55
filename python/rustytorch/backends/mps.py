"""rustytorch.backends.mps: the library has no Apple Metal backend."""


def is_available():
    return False


def is_built():
    return False
