"""The main job, end to end on the embedded plane: start it, ``pulumi preview``, ``pulumi up``,
then show the evidence (objects, field managers, pods on the simulated GPU nodes).

Running it twice is a no-op the second time: the plane is reused and ``up`` reports no changes.
CLI layer.
"""

from __future__ import annotations

import sys
import time
from typing import IO

from infercrane.cli.progress import ProgressView, log_path
from infercrane.core.errors import InferCraneError
from infercrane.core.events import Event, Note
from infercrane.core.plan.actions import count_words
from infercrane.engine.changes import applied_events
from infercrane.engine.workspace import Engine
from infercrane.live.api import Live
from infercrane.live.inspect import inspect_report, render_text
from infercrane.local.plane import Plane
from infercrane.project import paths, stackfile
from infercrane.shell.channel import Channel


def _view(op: str, total: int, kinds: int, log: IO[str]) -> ProgressView:
    """The same progress line as the CLI's: live on a terminal, plain lines otherwise."""
    return ProgressView(
        op, total, stream=sys.stdout, mode="live" if sys.stdout.isatty() else "lines", children_per_replica=kinds, log=log
    )


def _print_notes(event: Event) -> None:
    if isinstance(event, Note):
        print(event.text)


def run(stack: str = "local") -> int:
    began = time.monotonic()
    try:
        plane = Plane.default()
        print("== local control plane")
        plane.start()
        config = stackfile.load_stack(stack)
        engine = Engine(stack, sink=_print_notes)
        replicas, kinds = len(config.replicas), len(config.kubernetes.object_kinds)
        log = log_path(paths.project_root(), stack, "demo")
        print(f"== pulumi preview --stack {stack}  (Pulumi's full log: {paths.display_path(log)})")
        with log.open("w", encoding="utf-8") as sink:
            view = _view("plan", replicas, kinds, sink)
            pre = engine.preview(on_output=view.on_output, on_event=applied_events(view), suppress_outputs=True)
            view.checked(replicas)
            view.close("done")
            print(f"preview: {count_words(pre.change_summary)}")
            print(f"== pulumi up --stack {stack}")
            view, outcome = _view("deploy", replicas, kinds, sink), "failed"
            try:
                up = engine.up(
                    on_output=view.on_output, on_event=applied_events(view), channel=Channel(progress=view), suppress_outputs=True
                )
                outcome = "done"
            finally:
                view.close(outcome)
        print(f"up: {up.summary.result}: {count_words(up.summary.resource_changes, done=True)}")
        from infercrane.local.layout import VIEWER_CONTEXT

        viewer = Live.connect(config.kubernetes.model_copy(update={"context": VIEWER_CONTEXT}))
        print(
            f"== evidence (objects read as the deploying identity, context {config.kubernetes.context}, bound to exactly "
            f"the shipped Role; pods and nodes as the read-only context {VIEWER_CONTEXT})"
        )
        print(render_text(*inspect_report(config, Live.connect(config.kubernetes), stack=stack, pod_reader=viewer)))
    except InferCraneError as exc:
        print(f"error: {exc}")
        return 1
    print(f"== done in {time.monotonic() - began:.1f}s")
    return 0
