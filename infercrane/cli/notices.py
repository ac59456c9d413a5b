"""What a command says on stderr before and while it acts: the fields the environment overrides
and the target it acts on (first, so a CI log shows them), its events (JSON with ``--json``), and
the progress view of a long command. CLI layer.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from infercrane.project import paths, stackfile

if TYPE_CHECKING:
    from infercrane.cli.progress import ProgressView
    from infercrane.core.model.config import InferCraneConfig


def disclose(args: argparse.Namespace, *stacks: str, acting: InferCraneConfig | None = None) -> None:
    """Before anything else, on stderr: every field the environment overrides in ``stacks`` and,
    for a command that changes a cluster, the context and namespace it acts on (JSON events with
    --json)."""
    as_json = bool(getattr(args, "json", False))
    for stack in stacks:
        for sentence in stackfile.env_overrides(stack):
            event(as_json, {"event": "override", "stack": stack, "message": sentence}, f"note: {sentence}")
    if acting is not None:
        from infercrane.core.load.loading import advice

        for line in advice(acting):
            event(as_json, {"event": "advice", "stack": stacks[0], "message": line}, f"note: {line}")
        t = acting.kubernetes
        what = f"stack {stacks[0]}: context {t.context}, namespace {t.namespace}, workload API {t.workload_api}"
        what += t.allocation.described.format(device_class=t.gpu_device_class)
        event(as_json, {"event": "target", "stack": stacks[0], "context": t.context, "namespace": t.namespace}, what)


def event(as_json: bool, doc: dict[str, Any], text: str) -> None:
    import json

    print(json.dumps(doc) if as_json else text, file=sys.stderr, flush=True)


@contextmanager
def progress(args: argparse.Namespace, op: str, total: int, children: int = 1) -> Iterator[ProgressView]:
    """The progress view of one long command (infercrane.cli.progress): a live line on a terminal,
    plain lines otherwise, JSON events with --json; Pulumi's full log in a file named here, or
    also on stderr with --verbose."""
    from infercrane.cli.progress import ProgressView, log_path

    mode = "json" if args.json else ("live" if sys.stderr.isatty() else "lines")
    path = log_path(paths.project_root(), args.stack, op)
    with path.open("w", encoding="utf-8") as log:
        if not args.json:
            print(f"pulumi log: {paths.display_path(path)}", file=sys.stderr, flush=True)
        view = ProgressView(op, total, stream=sys.stderr, mode=mode, children_per_replica=children, log=log, echo=args.verbose)
        outcome = "failed"
        try:
            yield view
            outcome = "done"
        finally:
            view.close(outcome)
