"""python -m rustytorch.train: the same as the rtx-train command."""
from .cli import main

main()
