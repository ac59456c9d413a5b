"""What a stack remembers of its canaries: the rejections (stack tags) a deploy refuses to repeat,
and the last verdict per endpoint that ``inspect`` shows -- read through a double of the engine
(its state's outputs and its tags, nothing else)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from infercrane.cli import output
from infercrane.core.plan.waves import EndpointRollout, Rollout
from infercrane.engine.rejections import REJECTED_TAG, last_verdicts, rejected_before


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
    assert rejected_before(engine, moving("qwen", "rel-b")) == {  # type: ignore[arg-type]
        "qwen": ("rel-b", "REJECT at 2026-12-05T04:00:00Z, record sha256:bb")
    }
    assert rejected_before(engine, moving("qwen", "rel-c")) == {}  # type: ignore[arg-type]


def test_inspect_says_each_endpoints_last_canary_verdict_in_text_and_json() -> None:
    said = {"qwen": "ACCEPT at 2026-12-05T05:00:00Z, record sha256:aa"}
    text = output.inspect("prod", [], {}, said, as_doc=False)
    assert text.splitlines()[0] == "endpoint qwen: last canary verdict: ACCEPT at 2026-12-05T05:00:00Z, record sha256:aa"
    assert json.loads(output.inspect("prod", [], {}, said, as_doc=True))["canaries"] == said
    assert "canaries" not in json.loads(output.inspect("prod", [], {}, {}, as_doc=True)), "no canary policy: no key"


def test_a_rejection_the_backend_cannot_remember_is_a_warning_and_never_stops_the_rollback() -> None:
    from infercrane.core.errors import CanaryRejected, EngineError, RolloutStopped
    from infercrane.core.events import Note
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
