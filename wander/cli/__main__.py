"""`python -m wander.cli`: the `wander` command."""

import sys

from wander.cli import main

sys.exit(main())
