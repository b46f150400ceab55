"""torch._dynamo.config's place: scripts set its settings (`cache_size_limit = 64`, `optimize_ddp =
False`, `suppress_errors = True`); without a graph compiler they have no effect. A setting reads back as
set; one never set reads as missing (hasattr is False), so scripts that test before setting still set."""
