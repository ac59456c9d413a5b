"""``live_by_name``: every object of the stack's kinds, one LIST per kind, the kinds at once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from infercrane.core.load import loading
from infercrane.live.client import cluster, failures
from tests.unit.conftest import DIGEST

TARGET = loading.load({"infercrane:kubernetes": {"context": "gpu-dev", "imageDigest": DIGEST}}, source="s", env={}).kubernetes


class Listed:
    def __init__(self, name: str) -> None:
        self.raw = {"metadata": {"name": name, "uid": f"uid-{name}"}}

    def to_dict(self) -> dict[str, Any]:
        return self.raw


class Lists:
    """A client whose LIST of each kind answers ``answers[kind]`` (objects' names, or an error),
    each LIST only once every kind's LIST has arrived: a client listing one kind after another
    never gets an answer (the barrier breaks after 5 s)."""

    def __init__(self, answers: dict[str, list[str] | ApiError]) -> None:
        self.answers = answers
        self.all_sent = threading.Barrier(len(answers), timeout=5)

    def list(self, res: Any, namespace: str | None = None) -> list[Listed]:
        assert namespace == TARGET.namespace
        self.all_sent.wait()
        answer = self.answers[res.__name__]
        if isinstance(answer, ApiError):
            raise answer
        return [Listed(n) for n in answer]


def test_every_kind_is_listed_at_once_and_keyed_by_kind_and_name() -> None:
    client = Lists({"Deployment": ["infercrane-a", "infercrane-b"], "Service": ["infercrane-a"]})
    live = cluster.live_by_name(client, TARGET, ["Service", "Deployment", "Service"])  # type: ignore[arg-type]
    assert sorted(live) == [("Deployment", "infercrane-a"), ("Deployment", "infercrane-b"), ("Service", "infercrane-a")]
    assert live[("Service", "infercrane-a")]["metadata"]["uid"] == "uid-infercrane-a"


def test_a_kind_the_server_does_not_serve_has_no_objects_and_the_others_are_still_listed() -> None:
    missing = ApiError(status=Status(code=404, message="the server could not find the requested resource"))
    client = Lists({"Deployment": ["infercrane-a"], "InferenceService": missing})
    live = cluster.live_by_name(client, TARGET, ["Deployment", "InferenceService"])  # type: ignore[arg-type]
    assert list(live) == [("Deployment", "infercrane-a")]


def test_a_kind_the_identity_may_not_list_fails_with_what_was_refused() -> None:
    refused = ApiError(status=Status(code=403, message='services is forbidden: User "u" cannot list resource'))
    client = Lists({"Deployment": ["infercrane-a"], "Service": refused})
    with pytest.raises(failures.Forbidden) as exc:
        cluster.live_by_name(client, TARGET, ["Deployment", "Service"])  # type: ignore[arg-type]
    assert "list Services in namespace infercrane-system" in str(exc.value)
    assert "forbidden for the identity of context 'gpu-dev'" in str(exc.value)
