"""The progress line of long commands, as a person and a machine read it (TTY, plain, JSON)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

from infercrane.cli.progress import ProgressView
from infercrane.core.events import Applied, Deleted, Note, Readiness, Remaining

STACK = "urn:pulumi:dev::infercrane::infercrane:index:Replica"


def outputs_event(urn: str) -> Any:
    return SimpleNamespace(res_outputs_event=SimpleNamespace(metadata=SimpleNamespace(urn=urn)))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed_deploy(view: ProgressView, clock: Clock) -> None:
    for slot in ("qwen-0", "qwen-1", "qwen-2"):
        view(Applied(slot))  # its Deployment
        view(Applied(slot))  # its Service
    clock.now += 12
    view(Readiness(1, 3, 2, "Pending: FailedScheduling: 0/3 nodes are available"))
    clock.now += 29
    view(Readiness(3, 3))


def test_plain_lines_for_ci_logs_say_applied_ready_and_what_is_slow() -> None:
    out, log, clock = io.StringIO(), io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="lines", children_per_replica=2, log=log, clock=clock)
    feed_deploy(view, clock)
    view.close("done")
    lines = out.getvalue().splitlines()
    assert lines[0] == "applied 0/3 · ready 0/3 · 0 s"  # the first change is shown at once
    assert "applied 3/3 · ready 1/3 · waiting on 2 (Pending: FailedScheduling: 0/3 nodes are available) · 12 s" in lines
    assert lines[-1] == "deploy done: applied 3/3 · ready 3/3 · 41 s"
    assert "[infercrane] readiness: 1/3 ready" in log.getvalue()  # the log file has it, the screen the line
    assert "readiness" not in out.getvalue()


def test_plain_lines_are_rate_limited() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="lines", children_per_replica=2, clock=clock)
    for _ in range(5):
        view(Readiness(1, 3, 2))
        view(Readiness(2, 3, 1))
    assert len(out.getvalue().splitlines()) == 1


def test_a_terminal_gets_one_line_updated_in_place() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="live", children_per_replica=2, clock=clock)
    feed_deploy(view, clock)
    view.close("done")
    text = out.getvalue()
    assert "\x1b[" in text  # cursor control: the line is redrawn, not appended
    assert text.rstrip().endswith("deploy done: applied 3/3 · ready 3/3 · 41 s")


def test_json_events_for_machines() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="json", children_per_replica=2, clock=clock)
    feed_deploy(view, clock)
    view.close("done")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert events[-1] == {"event": "done", "op": "deploy", "elapsed": 41.0}
    waiting = next(e for e in events if e["event"] == "readiness" and e["ready"] == 1)
    assert waiting["applied"] == 3 and waiting["waitingOn"] == 2 and waiting["why"].startswith("Pending: FailedScheduling")


def test_verbose_echoes_pulumis_log_beside_the_line() -> None:
    out = io.StringIO()
    view = ProgressView("deploy", 1, stream=out, mode="lines", echo=True)
    view.on_output("Updating (dev):")
    assert "  | Updating (dev):" in out.getvalue()


def test_destroy_counts_deleted_and_remaining() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("destroy", 0, stream=out, mode="lines", clock=clock)
    view(Deleted(1, 200))
    clock.now += 11
    view(Deleted(200, 200))
    view(Remaining(0))
    view.close("done")
    lines = out.getvalue().splitlines()
    assert lines[0] == "deleted 1/200 · 0 s"
    assert lines[-1] == "destroy done: deleted 200/200 · remaining 0 · 11 s"


def test_a_note_is_a_plain_line_or_a_json_event_and_lands_in_the_log() -> None:
    import io

    from infercrane.cli.progress import ProgressView

    for mode, want in (("lines", "rollout: qwen wave 1/1 (down a; up b)"), ("json", '"event": "note"')):
        out, log = io.StringIO(), io.StringIO()
        view = ProgressView("deploy", 2, stream=out, mode=mode, log=log)
        view(Note("rollout: qwen wave 1/1 (down a; up b)"))
        assert want in out.getvalue()
        assert "[infercrane] rollout: qwen wave 1/1" in log.getvalue()


def test_pulumis_log_lines_never_move_the_counts() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 300, stream=out, mode="json", children_per_replica=2, clock=clock)
    view.on_output(" +  pulumi:pulumi:Stack infercrane-ours creating (28s) readiness: 20/300 ready after 0s; waiting on 280")
    assert out.getvalue() == ""  # the program's progress arrives typed, never parsed from a log line


def test_the_engines_objects_become_applied_events_and_components_do_not() -> None:
    from infercrane.engine.changes import applied_events

    seen: list[Any] = []
    on_event = applied_events(seen.append)
    on_event(outputs_event(f"{STACK}$kubernetes:apps/v1:Deployment::qwen-0-deployment"))
    on_event(outputs_event(f"{STACK}$kubernetes:core/v1:Service::qwen-0-service"))
    on_event(outputs_event(f"{STACK}::qwen-0"))  # the component itself: not an object
    on_event(outputs_event("urn:pulumi:dev::infercrane::pulumi:providers:kubernetes::infercrane"))
    on_event(SimpleNamespace(res_outputs_event=None))
    assert seen == [Applied("qwen-0"), Applied("qwen-0")]


def test_the_programs_readiness_wait_reaches_the_progress_view_typed() -> None:
    """The real producer (the program's publisher of the fleet wait's snapshots) into the real
    consumer (the CLI's view), as the Automation API run wires them through the Channel."""
    from infercrane.live.status.progress import Progress
    from infercrane.shell import progress as awaiting
    from infercrane.shell.channel import Channel

    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="json", children_per_replica=1, clock=clock)
    publish = awaiting.readiness_progress(Channel(progress=view))
    snapshot = Progress(1, 3, {"qwen-1": "Pending", "qwen-2": "Pending"}, 12.0, {"qwen-1": ["FailedScheduling: 0/3 nodes"]})
    awaiting.publish_snapshot(publish, snapshot)
    publish(Readiness(3, 3))
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["ready"], e["waitingOn"], e["why"]) for e in events] == [(1, 2, "FailedScheduling on 1"), (3, 0, None)]


def test_plain_pulumi_reads_the_readiness_wait_as_log_lines() -> None:
    from infercrane.shell.progress import readiness_line

    assert readiness_line(Readiness(1, 3, 2, "Pending", 12.4)) == "readiness: 1/3 ready after 12s; waiting on 2 (Pending)"
    assert readiness_line(Readiness(3, 3)) == "readiness: 3/3 ready"
