"""Cast rules for ops the Python package composes from other ops (group_norm, the losses written
here, cosine_similarity): `@runs_in_float32` gives such a function the rule the C++ front-ends
declare with RTX_AUTOCAST(fp32, ...). Inside an autocast region its tensor arguments are cast by the
library (16-bit floats to float32) and its body runs with autocast excluded; outside one it costs a
flag test."""
import functools

from . import _C


def runs_in_float32(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        if _C._autocast_active():
            return _C._autocast_call("fp32", fn, args, kwargs)
        return fn(*args, **kwargs)
    return run
