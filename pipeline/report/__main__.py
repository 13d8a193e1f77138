"""``python -m pipeline.report``: the same as ``isparse-report``."""
from . import main

main()
