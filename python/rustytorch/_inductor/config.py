"""torch._inductor.config's place: scripts set its settings (`coordinate_descent_tuning = True`,
`triton.unique_kernel_names = True`); without a graph compiler they have no effect. A setting reads
back as set; one never set reads as missing (hasattr is False), so scripts that test before setting
still set. The groups of settings scripts reach into are namespaces of their own."""
import types

triton = types.SimpleNamespace()
cpp = types.SimpleNamespace()
cuda = types.SimpleNamespace()
trace = types.SimpleNamespace()
aot_inductor = types.SimpleNamespace()
