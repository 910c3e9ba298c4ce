"""``python -m recpack_ope demo`` runs the same command line as ``recpack-ope``."""

import sys

from .cli import main

sys.exit(main())
