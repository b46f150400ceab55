"""CUDA graphs with PyTorch's API (docs/cuda_graphs.md): CUDAGraph is rtx::cuda::CUDAGraph, the
graph context manager is rtx::cuda::GraphCapture (after Python's garbage collection, so that
tensors only it would free go back before the capture), make_graphed_callables captures each
callable's forward and backward into two graphs sharing one pool, behind an autograd Function, and
graphed_step (this library's) runs a whole training step as one graph after eager warm-up steps."""
import gc

from .. import _C
from .._C import _cuda
from ..autograd import Function, grad
from ..utils.data.collate import is_tensor, map_nested, tensors_in

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


def _on_side_stream(side, fn):
    """fn() on stream side, after the work queued on the current stream and before what comes later."""
    current = _cuda.current_stream()
    side.wait_stream(current)
    _cuda.set_stream(side)
    try:
        return fn()
    finally:
        _cuda.set_stream(current)
        current.wait_stream(side)


def _with_tensors(like, tensors):
    """like (tensors nested in mappings and sequences) with its tensors replaced by tensors, in order."""
    it = iter(tensors)
    return map_nested(like, is_tensor, lambda t: next(it))


def _skeleton(data):
    """data without its tensors: what a replay cannot change."""
    return map_nested(data, is_tensor, lambda t: None)


class _StaticInputs:
    """The tensors a graph was captured on (copies or the caller's own) and what surrounds them; check
    says whether later inputs fit them: the same non-tensor values, tensor shapes, dtypes and devices."""

    def __init__(self, op, inputs, tensors):
        self.op = op
        self.skeleton = _skeleton(inputs)
        self.tensors = tensors

    def check(self, inputs):
        if _skeleton(inputs) != self.skeleton:
            raise _C.ValueError(f"[{self.op}] the arguments other than tensors differ from those captured "
                                f"({self.skeleton!r}, tensors shown as None), which a replay cannot change")
        given = tensors_in(inputs)
        for c, x in zip(self.tensors, given):
            if c.shape != x.shape or c.dtype != x.dtype or c.device != x.device:
                raise _C.ValueError(f"[{self.op}] an input of shape {list(x.shape)}, {x.dtype} on {x.device} does "
                                    f"not match the one captured ({list(c.shape)}, {c.dtype} on {c.device})")
        return given


class _GraphedCallable:
    """One callable's forward and backward graphs, their static inputs, outputs and gradients."""

    def __init__(self, func, sample_args, num_warmup_iters, allow_unused_input, pool):
        self.user_inputs = _StaticInputs("make_graphed_callables", sample_args, tensors_in(sample_args))
        params = tuple(func.parameters()) if hasattr(func, "parameters") else ()
        self.inputs = tuple(self.user_inputs.tensors) + params  # the static input surface
        needs_grad = [t for t in self.inputs if t.requires_grad]

        def warm_up():
            for _ in range(num_warmup_iters):
                outputs = [o for o in tensors_in(func(*sample_args)) if o.requires_grad]
                if outputs and needs_grad:
                    grad(outputs, needs_grad, [_C.ones_like(o) for o in outputs], allow_unused=allow_unused_input)

        _on_side_stream(_cuda.Stream(), warm_up)
        self.fwd = CUDAGraph()
        with graph(self.fwd, pool=pool):
            out = func(*sample_args)
        self.out_like = out
        self.outputs = tensors_in(out)
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
                for s, x in zip(static.user_inputs.tensors, inputs):
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
        given = self.user_inputs.check(args)
        outputs = self.function.apply(*(tuple(given) + self.inputs[len(given):]))
        if isinstance(outputs, _C.Tensor):
            outputs = (outputs,)
        return _with_tensors(self.out_like, outputs)


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
        self._side = _cuda.Stream()

    def __call__(self, *inputs):
        self.calls += 1
        if self.calls <= self.warmup:
            return _on_side_stream(self._side, lambda: self.fn(*inputs))
        if self.graph is None:
            self._static = _StaticInputs("graphed_step", inputs, [x.clone() for x in tensors_in(inputs)])
            self.graph = CUDAGraph()
            with graph(self.graph, pool=self.pool, capture_error_mode=self.capture_error_mode):
                self._outputs = self.fn(*_with_tensors(inputs, self._static.tensors))
        else:
            for static, x in zip(self._static.tensors, self._static.check(inputs)):
                static.copy_(x)
        self.graph.replay()
        return self._outputs


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
