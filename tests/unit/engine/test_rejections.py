"""What a stack remembers of its canaries: the rejections (stack tags) a deploy refuses to repeat,
and the last verdict per endpoint that ``inspect`` shows -- read through a double of the engine
(its state's outputs and its tags, nothing else)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from infercrane.cli import output
from infercrane.core.plan.marks import GPUS_TAG, JUDGING_TAG, REJECTED_TAG
from infercrane.core.plan.waves import EndpointRollout, Lane, Rollout, Stage
from infercrane.engine.rejections import Judged, judged, last_verdicts, marks


@dataclass
class EngineDouble:
    """A double of :class:`~infercrane.engine.workspace.Engine`: a checkpoint's outputs and the tags."""

    outputs: dict[str, Any] = field(default_factory=dict)
    tag_values: dict[str, str] = field(default_factory=dict)

    def state(self) -> dict[str, Any]:
        return {"resources": [{"type": "pulumi:pulumi:Stack", "outputs": self.outputs}]}

    def tags(self) -> dict[str, str]:
        return dict(self.tag_values)


ACCEPTED = {"outcome": "ACCEPT", "digest": "sha256:aa", "at": "2026-12-05T03:00:00Z"}


def moving(endpoint: str, release: str) -> Rollout:
    e = EndpointRollout(endpoint, 1, 0, "in place", (), 2, 2, 1, 2, 2, 2, release=release)
    return Rollout((e,), ())


def test_the_last_verdict_is_the_later_of_the_recorded_accept_and_the_remembered_rejection() -> None:
    rejected = "rel-b REJECT at 2026-12-05T04:00:00Z, record sha256:bb"
    engine = EngineDouble({"canaries": {"qwen": ACCEPTED, "gone": ACCEPTED}}, {REJECTED_TAG + "qwen": rejected})
    assert last_verdicts(engine, ["qwen"]) == {  # type: ignore[arg-type]
        "qwen": "REJECT at 2026-12-05T04:00:00Z, record sha256:bb; that release is refused unless deploy --retry-rejected"
    }
    later = EngineDouble({"canaries": {"qwen": ACCEPTED | {"at": "2026-12-05T05:00:00Z"}}}, {REJECTED_TAG + "qwen": rejected})
    assert last_verdicts(later, ["qwen"]) == {"qwen": "ACCEPT at 2026-12-05T05:00:00Z, record sha256:aa"}  # type: ignore[arg-type]


def test_a_rejection_refuses_only_the_release_it_rejected() -> None:
    engine = EngineDouble(tag_values={REJECTED_TAG + "qwen": "rel-b REJECT at 2026-12-05T04:00:00Z, record sha256:bb"})
    b, c = moving("qwen", "rel-b"), moving("qwen", "rel-c")
    assert marks(engine, b).rejected_in(b) == {  # type: ignore[arg-type]
        "qwen": ("rel-b", "REJECT at 2026-12-05T04:00:00Z, record sha256:bb")
    }
    assert marks(engine, c).rejected_in(c) == {}  # type: ignore[arg-type]


def test_inspect_says_each_endpoints_last_canary_verdict_in_text_and_json() -> None:
    said = {"qwen": "ACCEPT at 2026-12-05T05:00:00Z, record sha256:aa"}
    text = output.inspect("prod", [], {}, said, as_doc=False)
    assert text.splitlines()[0] == "endpoint qwen: last canary verdict: ACCEPT at 2026-12-05T05:00:00Z, record sha256:aa"
    assert json.loads(output.inspect("prod", [], {}, said, as_doc=True))["canaries"] == said
    assert "canaries" not in json.loads(output.inspect("prod", [], {}, {}, as_doc=True)), "no canary policy: no key"


def test_a_rejection_the_backend_cannot_remember_is_a_warning_and_never_stops_the_rollback() -> None:
    from infercrane.core.errors import EngineError
    from infercrane.core.events import Note
    from infercrane.core.stops import CanaryRejected, RolloutStopped
    from infercrane.engine.rejections import remember_rejections

    class Refusing(EngineDouble):
        def set_tag(self, name: str, value: str) -> None:
            raise EngineError("the backend refused the write")

    said: list[Note] = []
    rejected = CanaryRejected("canary qwen: REJECT -- slower", True, False, outcome="REJECT", digest="sha256:x")
    stopped = RolloutStopped([("qwen", "wave 1/2 (the canary)", rejected)], 1)
    remember_rejections(Refusing(), moving("qwen", "rel-b"), stopped, "2026-12-05T04:00:00Z", said.append)  # type: ignore[arg-type]
    (note,) = said
    assert note.text.startswith("warning: the rejection of endpoint qwen's release could not be remembered (")
    assert "the backend refused the write" in note.text and note.text.endswith("the rollback goes on")


@dataclass
class ContextDouble:
    """Stands in for live.stack.context.StackContext: its rollout planned again with ``unproven`` (recorded)."""

    asked: list[frozenset[str]] = field(default_factory=list)
    started: list[Any] = field(default_factory=list)

    def rollout(self, rendered: Any, report: Any, state: Any, unproven: frozenset[str], started: Any = None) -> Rollout:
        self.asked.append(unproven)
        self.started.append(started)
        return moving("qwen", "replanned")


@dataclass
class ObservedDouble:
    """Stands in for engine.observed.Observed: its rollout and its context."""

    rollout: Rollout
    ctx: ContextDouble = field(default_factory=ContextDouble)
    rendered: Any = None
    report: Any = None
    state: Any = None


def test_a_release_whose_judging_never_ended_is_planned_again_as_unproven() -> None:
    engine = EngineDouble(tag_values={JUDGING_TAG + "qwen": "rel-b since 2026-12-06T10:00:00Z"})
    seen = ObservedDouble(moving("qwen", "rel-b"))
    got = judged(engine, seen)  # type: ignore[arg-type]
    assert seen.ctx.asked == [frozenset({"rel-b"})] and got.unjudged == {"qwen": "rel-b"}
    assert got.rollout == moving("qwen", "replanned")


def test_a_retried_rejection_is_unproven_too_and_no_mark_plans_nothing_again() -> None:
    engine = EngineDouble(tag_values={REJECTED_TAG + "qwen": "rel-b REJECT at 2026-12-05T04:00:00Z, record sha256:bb"})
    seen = ObservedDouble(moving("qwen", "rel-b"))
    assert judged(engine, seen).rollout == moving("qwen", "rel-b") and seen.ctx.asked == []  # type: ignore[arg-type]
    assert isinstance(judged(engine, seen, retry_rejected=True), Judged)  # type: ignore[arg-type]
    assert seen.ctx.asked == [frozenset({"rel-b"})]


def test_inspect_says_a_canary_being_judged_has_no_verdict_yet() -> None:
    engine = EngineDouble(tag_values={JUDGING_TAG + "qwen": "rel-b since 2026-12-06T10:00:00Z"})
    assert last_verdicts(engine, ["qwen"]) == {  # type: ignore[arg-type]
        "qwen": "none yet for release rel-b: a deploy began judging it and has no verdict (still baking, or it ended "
        "without one); the next deploy judges it again before it goes further"
    }


@dataclass
class TaggingEngine(EngineDouble):
    """An engine double whose tags can be written and removed (``pulumi stack tag set``/``rm``)."""

    stack: str = "dev"

    def set_tag(self, name: str, value: str) -> None:
        self.tag_values[name] = value

    def remove_tag(self, name: str) -> None:
        self.tag_values.pop(name, None)


def _borrowing(endpoint: str, started: Any, lent: Any = ()) -> Rollout:
    e = EndpointRollout(endpoint, 0, 1, "surge", (), 2, 2, 2, 2, 2, 3, started=started, lent=lent)
    lane = Lane(endpoint, (Stage(frozenset({"a0"}), borrow=(("L4", 1),)),))
    return Rollout((e,), (lane,), max_extra_gpus=1)


def test_a_run_that_borrows_marks_its_endpoints_gpus_once_and_a_finished_lane_removes_the_mark() -> None:
    from infercrane.engine.rejections import begin_borrowing, end_borrowing

    engine = TaggingEngine()
    at = "2026-12-06T10:00:00Z"
    assert begin_borrowing(engine, _borrowing("qwen", (("L4", 2),)), {}, at) == ["qwen"]  # type: ignore[arg-type]
    assert engine.tag_values == {GPUS_TAG + "qwen": f"L4=2 since {at}"}
    # a rerun after a run cut short: the mark stays as the first run wrote it, never rewritten from what runs
    rerun = _borrowing("qwen", (("L4", 2),), lent=(("L4", 1),))
    assert begin_borrowing(engine, rerun, {"qwen": (("L4", 2),)}, "later") == ["qwen"]  # type: ignore[arg-type]
    assert engine.tag_values == {GPUS_TAG + "qwen": f"L4=2 since {at}"}
    assert begin_borrowing(engine, Rollout((), (), max_extra_gpus=None), {}, at) == []  # type: ignore[arg-type]
    end_borrowing(engine, ["qwen"])  # type: ignore[arg-type]
    assert engine.tag_values == {}


def test_a_gpus_mark_plans_the_rollout_again_from_the_changes_start() -> None:
    engine = EngineDouble(tag_values={GPUS_TAG + "qwen": "L4=2 since 2026-12-06T10:00:00Z", GPUS_TAG + "gone": "L4=1 since x"})
    seen = ObservedDouble(_borrowing("qwen", (("L4", 3),)))
    got = judged(engine, seen)  # type: ignore[arg-type]
    assert seen.ctx.started == [{"qwen": (("L4", 2),)}] and got.started == {"qwen": (("L4", 2),)}
    unmarked = ObservedDouble(_borrowing("qwen", (("L4", 3),)))
    judged(EngineDouble(), unmarked)  # type: ignore[arg-type]
    assert unmarked.ctx.started == []  # no mark: planned once, from what runs
