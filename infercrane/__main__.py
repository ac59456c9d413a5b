"""``python -m infercrane``: the CLI."""

from __future__ import annotations

import sys

from infercrane.cli import main

sys.exit(main(sys.argv[1:]))
