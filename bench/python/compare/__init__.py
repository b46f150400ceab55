"""Helpers of bench/compare_torch.py: the timing harness (harness), the operator workloads (ops)
and the training, decoding and allocator workloads (training)."""
