"""The main job, end to end on the embedded plane: start it, ``pulumi preview``, ``pulumi up``,
then show the evidence (objects, field managers, pods on the simulated GPU nodes); then, when the
plane runs its real node, the same for stack ``local-node`` and each replica's own answer to
``/v1/models`` on its pod address (the engine double's: a test double, never an engine).

Running it twice is a no-op the second time: the plane is reused and ``up`` reports no changes.
CLI layer.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO

from infercrane.cli.progress import ProgressView, log_path
from infercrane.core.errors import InferCraneError
from infercrane.core.events import Event, Note
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.plan.actions import count_words
from infercrane.core.stops import RolloutRefused
from infercrane.engine import idempotency, operations
from infercrane.engine.changes import applied_events
from infercrane.engine.workspace import Engine
from infercrane.live.client.api import Live
from infercrane.live.evidence import asking, served, worker_key
from infercrane.live.inspect import inspect_report, render_text
from infercrane.local.bootstrap import WORKER_KEY_FILE
from infercrane.local.layout import VIEWER_CONTEXT
from infercrane.local.plane import Plane
from infercrane.project import paths, stackfile
from infercrane.shell.channel import Channel

NODE_STACK = paths.LOCAL_NODE_STACK


def _view(op: str, total: int, kinds: int, log: IO[str]) -> ProgressView:
    """The same progress line as the CLI's: live on a terminal, plain lines otherwise."""
    return ProgressView(
        op, total, stream=sys.stdout, mode="live" if sys.stdout.isatty() else "lines", children_per_replica=kinds, log=log
    )


def _print_notes(event: Event) -> None:
    if isinstance(event, Note):
        print(event.text)


def _deploy(stack: str) -> InferCraneConfig:
    """``pulumi preview`` then ``pulumi up`` of ``stack``, with the CLI's progress line."""
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
        view, outcome, up = _view("deploy", replicas, kinds, sink), "failed", None
        try:
            up = engine.up(
                on_output=view.on_output, on_event=applied_events(view), channel=Channel(progress=view), suppress_outputs=True
            )
            outcome = "done"
        except RolloutRefused:
            # A plane deployed by an earlier release: a change that restarts every replica (a new
            # pod template) must roll in waves, which one `pulumi up` refuses to do; deploy rolls it.
            outcome = "refused: it rolls in waves"
        finally:
            view.close(outcome)
        if up is None:
            print(f"== infercrane deploy --stack {stack}  (the change restarts serving replicas: it rolls in waves)")
            view, outcome = _view("deploy", replicas, kinds, sink), "failed"
            try:
                result = operations.deploy(
                    Engine(stack, sink=view), config, idempotency.new_idempotency_key(), on_output=view.on_output, sink=view
                )
                outcome = "done"
            finally:
                view.close(outcome)
            print(f"deploy {result.key}: {result.status}")
            return config
    print(f"up: {up.summary.result}: {count_words(up.summary.resource_changes, done=True)}")
    return config


def _evidence(stack: str, config: InferCraneConfig) -> Live:
    viewer = Live.connect(config.kubernetes.model_copy(update={"context": VIEWER_CONTEXT}))
    print(
        f"== evidence (objects read as the deploying identity, context {config.kubernetes.context}, bound to exactly "
        f"the shipped Role; pods and nodes as the read-only context {VIEWER_CONTEXT})"
    )
    print(render_text(*inspect_report(config, Live.connect(config.kubernetes), stack=stack, pod_reader=viewer)))
    return viewer


def _serving(plane: Plane, config: InferCraneConfig, viewer: Live) -> None:
    """Each replica's serving evidence, taken as the viewer (the optional EndpointSlice read is
    bound to it, not to the deploying identity) with the plane's worker key -- its own credential,
    the file the Secret was made from -- then asked again without the key: the engine refuses."""
    key, why = worker_key.worker_key({worker_key.KEY_FILE_ENV: str(plane.state / WORKER_KEY_FILE)})
    print(
        "== serving evidence (each replica's engine double asked GET /health, then GET /v1/models, at its Service's ready address)"
    )
    if key is None:
        print(f"  not verifiable: the plane has no {WORKER_KEY_FILE} (bootstrapped before it existed): `local reset`")
        return
    checker = served.Checker(viewer, config, key, why)
    for replica in config.replicas:
        evidence = checker.check(replica)
        print(f"  {replica.key}: {evidence.line()}")
        for address, port in evidence.asked:
            print(f"  {'':<{len(replica.key)}}  without the key: {asking.models(address, port, None).status}")


def run(stack: str = "local") -> int:
    began = time.monotonic()
    try:
        plane = Plane.default()
        print("== local control plane")
        status = plane.start()
        key_file = plane.state / WORKER_KEY_FILE
        if key_file.is_file():  # the deploys take evidence with the plane's own key, as any control plane would
            os.environ.setdefault(worker_key.KEY_FILE_ENV, str(key_file))
        config = _deploy(stack)
        _evidence(stack, config)
        if status.get("realNode") and stack != NODE_STACK:
            print(f"== the real node {status['realNode']}: stack {NODE_STACK}")
            config = _deploy(NODE_STACK)
            _serving(plane, config, _evidence(NODE_STACK, config))
        elif stack == NODE_STACK:
            _serving(plane, config, Live.connect(config.kubernetes.model_copy(update={"context": VIEWER_CONTEXT})))
    except InferCraneError as exc:
        print(f"error: {exc}")
        return 1
    print(f"== done in {time.monotonic() - began:.1f}s")
    return 0
