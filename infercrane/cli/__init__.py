"""The ``infercrane`` command line, the top layer: :mod:`~infercrane.cli.main` (entry),
:mod:`~infercrane.cli.parser`, :mod:`~infercrane.cli.commands` (call the layers),
:mod:`~infercrane.cli.output` (format typed results), :mod:`~infercrane.cli.progress`, the demo."""

from infercrane.cli.main import entrypoint, main

__all__ = ["entrypoint", "main"]
