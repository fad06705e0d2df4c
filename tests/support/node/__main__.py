"""`python -m tests.support.node up|down|serve` (scripts/node/up and down)."""
import sys

from . import main

sys.exit(main())
