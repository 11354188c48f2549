"""`python -m softbench ...` is the same as the `softbench` command (handy where it is not installed)."""

import sys

from softbench.cli import main

sys.exit(main())
