"""``python -m pipeline.report``: the same as ``isparse-report``."""
from ._cli import main

main()
