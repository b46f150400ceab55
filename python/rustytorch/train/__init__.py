"""The bundled trainers behind the `rtx-train` command: an MLP and a CNN on Fashion-MNIST. Each run
writes config.json, metrics.jsonl, a plot and safetensors checkpoints into its output directory and
resumes from them exactly."""
