"""The hand-over point of a deploy whose first update starts beside its preflight (shell/gate.py),
and when a deploy may start it that early (observed.could_need_refresh)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from infercrane.core.errors import ClusterError
from infercrane.shell.gate import Gate, Handover

ROOT = Path(__file__).resolve().parents[3]


def test_an_opened_gate_hands_over_the_inputs_to_a_waiting_program() -> None:
    gate = Gate()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(gate.wait()))
    waiter.start()
    waiter.join(timeout=0.05)
    assert waiter.is_alive() and got == []  # the program waits until the caller decides
    gate.open(Handover(prepared="the preflight's"))
    waiter.join(timeout=5)
    assert got == [Handover(prepared="the preflight's")]


def test_a_called_off_gate_raises_the_callers_reason_in_the_program() -> None:
    gate = Gate()
    gate.call_off(ClusterError("the API server is unreachable"))
    with pytest.raises(ClusterError, match="the API server is unreachable"):
        gate.wait()


def test_calling_off_an_opened_gate_changes_nothing() -> None:
    gate = Gate()
    gate.open(Handover(prepared=1))
    gate.call_off(ClusterError("too late"))
    assert gate.wait() == Handover(prepared=1)


def _local() -> tuple[object, list[object]]:
    from infercrane.core.render.manifests import render_checked
    from infercrane.project.stackfile import load_stack

    config = load_stack("local", project_dir=ROOT, env={})
    return config, list(render_checked(config, "local"))


def test_a_first_deploy_starts_its_update_beside_the_preflight() -> None:
    from infercrane.engine.observed import could_need_refresh
    from infercrane.live.stack.context import StackContext

    config, rendered = _local()
    assert could_need_refresh(StackContext.of("local", config, object()), {}, rendered) is False  # type: ignore[arg-type]


def test_a_deploy_whose_objects_the_state_records_as_they_are_waits_for_the_preflight() -> None:
    """A record Pulumi would trust needs --refresh if the preflight finds its object drifted:
    that run cannot start before the verdict."""
    from importlib.metadata import version

    from infercrane.core.state import urns
    from infercrane.engine.observed import could_need_refresh
    from infercrane.live.stack.context import StackContext

    config, rendered = _local()
    ctx = StackContext.of("local", config, object())  # type: ignore[arg-type]
    provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))  # type: ignore[attr-defined]
    regs = urns.registrations("local", rendered, provider)  # type: ignore[arg-type]
    recorded = [{"urn": r.urn, "type": r.type, "inputs": dict(r.inputs)} for r in regs if r.inputs is not None]
    assert could_need_refresh(ctx, {"resources": recorded}, rendered) is True  # type: ignore[arg-type]
    changed = [dict(r, inputs={**r["inputs"], "spec": {}}) for r in recorded]
    assert could_need_refresh(ctx, {"resources": changed}, rendered) is False  # type: ignore[arg-type]
