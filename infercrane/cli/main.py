"""``infercrane``: parse, dispatch, and turn every user-facing failure into one message.

User mistakes print one clear message and no traceback (exit 1; usage errors exit 2). CLI layer.
"""

from __future__ import annotations

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
        if getattr(args, "json", False):  # with --json, stderr is JSON events only
            print(json.dumps({"event": "error", "command": args.command, "message": str(exc)}), file=sys.stderr)
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UsageError as exc:
        print(f"infercrane {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entrypoint() -> None:
    """Console-script entry point (``infercrane``)."""
    sys.exit(main(sys.argv[1:]))
