"""The progress line of long commands, as a person and a machine read it (TTY, plain, JSON)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

from infercrane.cli.progress import ProgressView

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
        view.on_event(outputs_event(f"{STACK}$kubernetes:apps/v1:Deployment::{slot}-deployment"))
        view.on_event(outputs_event(f"{STACK}$kubernetes:core/v1:Service::{slot}-service"))
        view.on_event(outputs_event(f"{STACK}::{slot}"))  # the component itself: not an object
    clock.now += 12
    view.on_output("I1130 readiness: 1/3 ready after 12s; waiting on 2 (Pending: FailedScheduling: 0/3 nodes are available)")
    clock.now += 29
    view.on_output("readiness: 3/3 ready")


def test_plain_lines_for_ci_logs_say_applied_ready_and_what_is_slow() -> None:
    out, log, clock = io.StringIO(), io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="lines", children_per_replica=2, log=log, clock=clock)
    feed_deploy(view, clock)
    view.close("done")
    lines = out.getvalue().splitlines()
    assert lines[0] == "applied 0/3 · ready 0/3 · 0 s"  # the first change is shown at once
    assert "applied 3/3 · ready 1/3 · waiting on 2 (Pending: FailedScheduling: 0/3 nodes are available) · 12 s" in lines
    assert lines[-1] == "deploy done: applied 3/3 · ready 3/3 · 41 s"
    assert "readiness: 1/3 ready" in log.getvalue()  # Pulumi's log goes to the file, not the screen
    assert "readiness" not in out.getvalue()


def test_plain_lines_are_rate_limited() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 3, stream=out, mode="lines", children_per_replica=2, clock=clock)
    for _ in range(5):
        view.on_output("readiness: 1/3 ready after 1s; waiting on 2")
        view.on_output("readiness: 2/3 ready after 1s; waiting on 1")
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
    view.deleted(1, 200)
    clock.now += 11
    view.deleted(200, 200)
    view.remaining(0)
    view.close("done")
    lines = out.getvalue().splitlines()
    assert lines[0] == "deleted 1/200 · 0 s"
    assert lines[-1] == "destroy done: deleted 200/200 · remaining 0 · 11 s"


def test_a_note_is_a_plain_line_or_a_json_event_and_lands_in_the_log() -> None:
    import io

    from infercrane.cli.progress import ProgressView

    for mode, want in (("lines", "rollout step 1/2: qwen wave 1/1 (down a; up b)"), ("json", '"event": "note"')):
        out, log = io.StringIO(), io.StringIO()
        view = ProgressView("deploy", 2, stream=out, mode=mode, log=log)
        view.note("rollout step 1/2: qwen wave 1/1 (down a; up b)")
        assert want in out.getvalue()
        assert "[infercrane] rollout step 1/2" in log.getvalue()


def test_the_summary_pulumi_repeats_after_an_update_does_not_move_the_ready_count_back() -> None:
    out, clock = io.StringIO(), Clock()
    view = ProgressView("deploy", 300, stream=out, mode="json", children_per_replica=2, clock=clock)
    view.on_output("Updating (ours):")
    view.on_output(" +  pulumi:pulumi:Stack infercrane-ours creating (28s) readiness: 20/300 ready after 0s; waiting on 280")
    view.on_output(" +  pulumi:pulumi:Stack infercrane-ours creating (82s) readiness: 271/300 ready after 54s; waiting on 29")
    view.on_output("Diagnostics:")
    view.on_output("  pulumi:pulumi:Stack (infercrane-ours):")
    view.on_output("    readiness: 20/300 ready after 0s; waiting on 280")  # the same lines again, oldest first
    assert [json.loads(line)["ready"] for line in out.getvalue().splitlines()] == [20, 271]
    view.on_output("Updating (ours):")  # the next step of a rollout: live again
    view.on_output(" ~  pulumi:pulumi:Stack infercrane-ours updating (3s) readiness: 300/300 ready")
    assert json.loads(out.getvalue().splitlines()[-1])["ready"] == 300
