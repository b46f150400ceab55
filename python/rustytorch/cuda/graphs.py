"""CUDA graphs with PyTorch's API (docs/cuda_graphs.md): CUDAGraph is rtx::cuda::CUDAGraph, the
graph context manager is rtx::cuda::GraphCapture (after Python's garbage collection, so that
tensors only it would free go back before the capture), make_graphed_callables captures each
callable's forward and backward into two graphs sharing one pool, behind an autograd Function, and
graphed_step (this library's) runs a whole training step as one graph after eager warm-up steps."""
import gc

from .. import _C
from .._C import _cuda
from ..autograd import Function, grad

CUDAGraph = _cuda.CUDAGraph
graph_pool_handle = _cuda.graph_pool_handle


def is_current_stream_capturing():
    """Whether the current stream of the current device is capturing a CUDA graph."""
    return _cuda.is_current_stream_capturing()


class graph:
    """Captures the work of a with-block into cuda_graph, on a side stream (stream, or one kept for
    captures) after synchronizing the device and emptying the cache. pool: another graph's pool() or
    a graph_pool_handle() to share memory with; capture_error_mode: 'global', 'thread_local' or
    'relaxed' (which CUDA calls the capture refuses, and from which threads). An exception inside the
    block abandons the capture."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self._capture = None

    def __enter__(self):
        gc.collect()
        self._capture = _cuda._GraphCapture(self.cuda_graph, self.pool, self.capture_stream, self.capture_error_mode)
        return self.cuda_graph

    def __exit__(self, exc_type, exc, tb):
        capture, self._capture = self._capture, None
        if exc_type is None:
            capture.finish()
        else:
            capture.abort()
        return False


def _flatten(args, what):
    flat = []
    for a in args:
        if isinstance(a, _C.Tensor):
            flat.append(a)
        elif isinstance(a, (tuple, list)):
            flat.extend(_flatten(a, what))
        else:
            raise TypeError(f"make_graphed_callables: {what} must be tensors or (nested) tuples of tensors, "
                            f"got {type(a).__name__}")
    return flat


def _check_like(op, captured, given):
    """Raises ValueError unless the tensors given match those captured in number, shape, dtype and device."""
    if len(given) != len(captured):
        raise _C.ValueError(f"[{op}] captured with {len(captured)} input tensors, called with {len(given)}")
    for c, x in zip(captured, given):
        if c.shape != x.shape or c.dtype != x.dtype or c.device != x.device:
            raise _C.ValueError(f"[{op}] an input of shape {list(x.shape)}, {x.dtype} on {x.device} does not match "
                                f"the one captured ({list(c.shape)}, {c.dtype} on {c.device})")


def _unflatten(flat, like):
    """flat's tensors in the nesting of like (a tensor, or nested tuples/lists of tensors)."""
    it = iter(flat)

    def build(x):
        if isinstance(x, _C.Tensor):
            return next(it)
        return type(x)(build(y) for y in x)

    return build(like)


class _GraphedCallable:
    """One callable's forward and backward graphs, their static inputs, outputs and gradients."""

    def __init__(self, func, sample_args, num_warmup_iters, allow_unused_input, pool):
        self.func = func
        self.user_inputs = _flatten(sample_args, "sample_args")
        params = tuple(func.parameters()) if hasattr(func, "parameters") else ()
        self.inputs = tuple(self.user_inputs) + params  # the static input surface
        self.sample_args = sample_args
        needs_grad = [t for t in self.inputs if t.requires_grad]
        side = _cuda.Stream()
        prev = _cuda.current_stream()
        side.wait_stream(prev)
        _cuda.set_stream(side)
        try:
            for _ in range(num_warmup_iters):
                outputs = [o for o in _flatten((func(*sample_args),), "outputs") if o.requires_grad]
                if outputs and needs_grad:
                    grad(outputs, needs_grad, [_C.ones_like(o) for o in outputs], allow_unused=allow_unused_input)
                del outputs
        finally:
            _cuda.set_stream(prev)
        prev.wait_stream(side)
        self.fwd = CUDAGraph()
        with graph(self.fwd, pool=pool):
            out = func(*sample_args)
        self.out_like = out
        self.outputs = _flatten((out,), "outputs")
        self.pool = self.fwd.pool()
        self.grad_outputs = [_C.empty_like(o) if o.requires_grad else None for o in self.outputs]
        self.bwd = CUDAGraph()
        with graph(self.bwd, pool=self.pool):
            diff_outputs = [o for o in self.outputs if o.requires_grad]
            grads = grad(diff_outputs, needs_grad, [g for g in self.grad_outputs if g is not None],
                         allow_unused=allow_unused_input) if diff_outputs and needs_grad else ()
        grads = iter(grads)
        self.grad_inputs = [next(grads) if t.requires_grad else None for t in self.inputs]
        # The autograd Function replaying the two graphs.
        static = self

        class Graphed(Function):
            @staticmethod
            def forward(ctx, *inputs):
                for s, x in zip(static.user_inputs, inputs):
                    if s.data_ptr() != x.data_ptr():
                        s.copy_(x)
                static.fwd.replay()
                return tuple(o.detach() for o in static.outputs)

            @staticmethod
            def backward(ctx, *grad_outputs):
                for s, g in zip(static.grad_outputs, grad_outputs):
                    if s is not None and g is not None and s.data_ptr() != g.data_ptr():
                        s.copy_(g)
                static.bwd.replay()
                return tuple(g.detach() if g is not None else None for g in static.grad_inputs)

        self.function = Graphed

    def __call__(self, *args):
        flat = _flatten(args, "arguments")
        _check_like("make_graphed_callables", self.user_inputs, flat)
        outputs = self.function.apply(*(tuple(flat) + self.inputs[len(self.user_inputs):]))
        if isinstance(outputs, _C.Tensor):
            outputs = (outputs,)
        return _unflatten(list(outputs), self.out_like)


class graphed_step:
    """fn(*inputs) run as one CUDA graph: the first `warmup` calls run fn eagerly on a side stream
    (as PyTorch's recipe asks), the next one captures fn on static copies of its inputs and replays
    it, and later calls copy their inputs into those copies and replay. inputs are tensors or nested
    tuples/lists of tensors whose shapes, dtypes and devices stay those of the capture; fn's result
    (tensors, or nested tuples/lists of them) is the graph's own memory, overwritten by the next
    call. Every call is a real step: fn must do all its work on the device (a capturable or fused
    optimizer with a tensor lr, set with fill_ between calls), and read nothing back until after."""

    def __init__(self, fn, warmup=3, pool=None, capture_error_mode="global"):
        if warmup < 1:
            raise _C.ValueError(f"[graphed_step] warmup must be at least 1 (the step runs eagerly before its "
                                f"capture, so that lazily made state exists), got {warmup}")
        self.fn = fn
        self.warmup = warmup
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self.graph = None
        self.calls = 0
        self._side = None

    def __call__(self, *inputs):
        self.calls += 1
        if self.calls <= self.warmup:
            return self._eager(inputs)
        flat = _flatten(inputs, "graphed_step inputs")
        if self.graph is None:
            self._static = [x.clone() for x in flat]
            self._like = inputs
            self.graph = CUDAGraph()
            with graph(self.graph, pool=self.pool, capture_error_mode=self.capture_error_mode):
                self._outputs = self.fn(*_unflatten(self._static, inputs))
        _check_like("graphed_step", self._static, flat)
        for static, x in zip(self._static, flat):
            static.copy_(x)
        self.graph.replay()
        return self._outputs

    def _eager(self, inputs):
        if self._side is None:
            self._side = _cuda.Stream()
        current = _cuda.current_stream()
        self._side.wait_stream(current)
        _cuda.set_stream(self._side)
        try:
            out = self.fn(*inputs)
        finally:
            _cuda.set_stream(current)
        current.wait_stream(self._side)
        return out


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    """Graphed versions of callables (a module or function, or a tuple of them, with sample_args a
    tuple of tensors or a tuple of such tuples): each one's forward and backward are captured on
    sample_args after num_warmup_iters warm-up iterations and replayed when called, with autograd
    through them (gradients reach the modules' parameters). A graphed module's forward replays while
    module.training is what it was at capture, and runs eagerly otherwise. Callables are captured in
    order, sharing one memory pool (pool, or a new one)."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise _C.ValueError(f"[make_graphed_callables] {len(callables)} callables but {len(sample_args)} sample "
                            "argument tuples")
    graphed = []
    for func, args in zip(callables, sample_args):
        if hasattr(func, "_forward_hooks") and (func._forward_hooks or func._forward_pre_hooks):
            raise _C.ValueError("[make_graphed_callables] modules with forward hooks cannot be graphed: the hooks "
                                "would run only at capture")
        g = _GraphedCallable(func, tuple(args), num_warmup_iters, allow_unused_input, pool)
        pool = g.pool
        graphed.append(g)
    results = []
    for func, g in zip(callables, graphed):
        if hasattr(func, "forward") and hasattr(func, "training"):
            results.append(_graph_module(func, g))
        else:
            results.append(g)
    return results[0] if single else tuple(results)


def _graph_module(module, graphed):
    eager_forward = module.forward
    training = module.training

    def forward(*args, **kwargs):
        if module.training == training and not kwargs:
            return graphed(*args)
        return eager_forward(*args, **kwargs)

    module.forward = forward
    module._graphed = graphed  # keeps the graphs and their memory with the module
    return module
