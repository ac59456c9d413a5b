"""``infercrane``: parse, dispatch, and turn every user-facing failure into one message.

User mistakes print one clear message and no traceback (exit 1; usage errors exit 2). CLI layer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from infercrane.cli.commands import COMMANDS
from infercrane.cli.exits import EXIT_FAILED
from infercrane.cli.parser import EXIT_USAGE, build_parser
from infercrane.core.errors import InferCraneError, UsageError
from infercrane.engine import runs
from infercrane.live.evidence import worker_key


def main(argv: list[str] | None = None) -> int:
    worker_key.withhold_key()  # no child of this command inherits the worker key's value
    args = build_parser().parse_args(argv)
    # What killed runs of this machine left in the temporary directory, whatever this command
    # runs: a deploy that replays its key (or a proven no-op, a destroy) starts no engine run,
    # and the engine run's own sweep (engine/runs.scratch) would never come.
    runs.sweep_scratch(Path(tempfile.gettempdir()))
    try:
        return COMMANDS[args.command](args)
    except InferCraneError as exc:
        _say(args, "error", str(exc), f"error: {exc}")
        return EXIT_FAILED
    except UsageError as exc:
        _say(args, "usage-error", str(exc), f"infercrane {args.command}: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say(args, "interrupted", "interrupted", "interrupted")
        return 130


def _say(args: argparse.Namespace, event: str, message: str, text: str) -> None:
    """The command's last word on stderr: a JSON event with --json (stderr is JSON events only), else ``text``."""
    if getattr(args, "json", False):
        print(json.dumps({"event": event, "command": args.command, "message": message}), file=sys.stderr)
    else:
        print(text, file=sys.stderr)


def entrypoint() -> NoReturn:
    """Console-script entry point (``infercrane``) and ``python -m infercrane``: :func:`main`, then
    the process ends with its code as soon as stdout and stderr are flushed. The interpreter's own
    teardown -- freeing every module and object one by one -- is skipped: it holds no output and
    no lock (every file this CLI writes is closed, or renamed into place, before ``main`` returns;
    its thread pools are joined), and it costs ~50 ms at the end of every command on 2 cores,
    5 % of a 100-replica destroy."""
    code = main(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            pass
    os._exit(code)
