"""takeover's answers when the API server fails mid-way: typed, one message, never a traceback."""

from __future__ import annotations

import copy
from typing import Any

import httpx2
import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from infercrane.core import naming
from infercrane.core.errors import ClusterError, TakeoverRefused
from infercrane.core.render.manifests import render_checked
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.takeover import takeover
from infercrane.project import stackfile


class Adapters:
    """Every object as the original adapter left it (no stack annotation); the patch fails with ``fails``."""

    def __init__(self, manifests: list[dict[str, Any]], fails: Exception) -> None:
        self.by_name = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
        self.fails = fails

    def get(self, res: Any, name: str, namespace: str | None = None) -> Any:
        obj = copy.deepcopy(self.by_name[(res.__name__, name)])
        obj["metadata"]["annotations"].pop(naming.ANNOTATION_STACK, None)
        obj["metadata"]["resourceVersion"] = "7"

        class Obj:
            def to_dict(self) -> dict[str, Any]:
                return obj

        return Obj()

    def patch(self, *a: Any, **k: Any) -> None:
        raise self.fails


@pytest.fixture
def adapters() -> tuple[Any, list[dict[str, Any]]]:
    config = stackfile.load_stack("dev", env={})
    return config, [m for r in render_checked(config, "dev") for m in r.manifests]


def test_an_api_server_lost_mid_takeover_is_one_unreachable_message(adapters: tuple[Any, list[dict[str, Any]]]) -> None:
    config, manifests = adapters
    client = Adapters(manifests, httpx2.ConnectError("[Errno 111] Connection refused"))
    with pytest.raises(failures.Unreachable) as exc:
        takeover(config, Live(client, config.kubernetes), "dev")  # type: ignore[arg-type]
    assert isinstance(exc.value, ClusterError)
    assert str(exc.value).startswith(f"cannot reach the Kubernetes API of context {config.kubernetes.context!r}")


def test_an_object_changed_mid_takeover_is_refused_with_what_was_taken(adapters: tuple[Any, list[dict[str, Any]]]) -> None:
    config, manifests = adapters
    client = Adapters(manifests, ApiError(status=Status(code=409, message="the object has been modified")))
    with pytest.raises(TakeoverRefused) as exc:
        takeover(config, Live(client, config.kubernetes), "dev")  # type: ignore[arg-type]
    assert "changed while it was being taken over; objects taken so far: none." in str(exc.value)
    assert "fix: run takeover again" in str(exc.value)
