"""rustytorch.jit: the decorators and queries model code uses, for a library that runs every module
eagerly (there is no TorchScript). script and trace return what they are given, so decorated
functions and modules run as written; is_scripting and is_tracing are False. Saving and loading
TorchScript archives is not provided: save models with rustytorch.save or safetensors."""


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    return func


def _decorator_or_identity(fn=None, **kwargs):
    if fn is None or not callable(fn):  # called with options: @ignore(drop=True)
        return lambda f: f
    return fn


ignore = unused = export = _decorator_or_identity


def is_scripting():
    return False


def is_tracing():
    return False


def annotate(the_type, the_value):
    return the_value


def save(*args, **kwargs):
    raise NotImplementedError("rustytorch.jit.save: TorchScript is not provided; save the state_dict with "
                              "rustytorch.save, or the tensors with rustytorch's safetensors support")


def load(*args, **kwargs):
    raise NotImplementedError("rustytorch.jit.load: TorchScript archives cannot be loaded; load a state_dict "
                              "saved with torch.save through rustytorch.load instead")
