"""``infercrane``: parse, dispatch, and turn every user-facing failure into one message.

User mistakes print one clear message and no traceback (exit 1; usage errors exit 2). CLI layer.
"""

from __future__ import annotations

import argparse
import json
import sys

from infercrane.cli.commands import COMMANDS, EXIT_FAILED
from infercrane.cli.parser import EXIT_USAGE, build_parser
from infercrane.core.errors import InferCraneError, UsageError


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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


def entrypoint() -> None:
    """Console-script entry point (``infercrane``)."""
    sys.exit(main(sys.argv[1:]))
