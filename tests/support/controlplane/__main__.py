"""`python -m tests.support.controlplane [WORKDIR]`: a control plane until Ctrl-C (see __init__.py)."""
import sys

from . import main

sys.exit(main())
