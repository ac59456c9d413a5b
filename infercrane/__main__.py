"""``python -m infercrane``: the CLI."""

from __future__ import annotations

from infercrane.cli.main import entrypoint

entrypoint()
