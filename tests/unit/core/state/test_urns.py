"""The state-proven no-op plan: a checkpoint matches only when it records exactly what the program
would register, with exactly the same inputs and nothing pending."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane.core import naming
from infercrane.core.load import loading
from infercrane.core.render import render_all
from infercrane.core.state import urns


def _expected(values: dict[str, Any]) -> list[urns.Registration]:
    config = loading.load(values, source="stacks/Pulumi.dev.yaml", env={})
    provider = urns.provider_inputs(config.kubernetes, "4.25.0")
    return urns.registrations("dev", render_all(config, naming.stack_identity("infercrane", "dev")), provider)


def _state_of(expected: list[urns.Registration]) -> dict[str, Any]:
    """A checkpoint as ``pulumi stack export`` shows it after an ``up`` of ``expected``."""
    root = {"urn": "urn:pulumi:dev::infercrane::pulumi:pulumi:Stack::infercrane-dev", "type": urns.STACK_TYPE}
    resources = [root]
    for e in expected:
        res: dict[str, Any] = {"urn": e.urn, "type": e.type}
        if e.inputs is not None:
            res["inputs"] = copy.deepcopy(dict(e.inputs)) | ({"__internal": {}} if e.type == urns.PROVIDER_TYPE else {})
        resources.append(res)
    return {"resources": resources}


def test_a_checkpoint_of_exactly_the_registrations_matches(values: dict[str, Any]) -> None:
    expected = _expected(values)
    assert [e.urn for e in expected] == [
        "urn:pulumi:dev::infercrane::pulumi:providers:kubernetes::infercrane",
        "urn:pulumi:dev::infercrane::infercrane:index:Replica::infercrane-935120ec8f148f03a1305f63",
        "urn:pulumi:dev::infercrane::infercrane:index:Replica$kubernetes:apps/v1:Deployment::infercrane-935120ec8f148f03a1305f63-deployment",
        "urn:pulumi:dev::infercrane::infercrane:index:Replica$kubernetes:core/v1:Service::infercrane-935120ec8f148f03a1305f63-service",
    ]
    assert urns.state_matches(_state_of(expected), expected) == []


def _mutate_input(state: dict[str, Any]) -> None:
    state["resources"][3]["inputs"]["spec"]["replicas"] = 2


def _drop_service(state: dict[str, Any]) -> None:
    del state["resources"][4]


def _extra_replica(state: dict[str, Any]) -> None:
    state["resources"].append(
        {"urn": "urn:pulumi:dev::infercrane::infercrane:index:Replica::gone-0", "type": urns.COMPONENT_TYPE}
    )


def _pending(state: dict[str, Any]) -> None:
    state["pending_operations"] = [{"type": "creating", "resource": {}}]


def _provider_version(state: dict[str, Any]) -> None:
    state["resources"][1]["inputs"]["version"] = "4.24.0"


def _pending_delete(state: dict[str, Any]) -> None:
    state["resources"][3]["delete"] = True


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (_mutate_input, "Deployment::infercrane-935120ec8f148f03a1305f63-deployment: recorded inputs differ"),
        (_drop_service, "Service::infercrane-935120ec8f148f03a1305f63-service: not in the state"),
        (_extra_replica, "Replica::gone-0: in the state, not in the config"),
        (_pending, "1 pending operation(s) in the state"),
        (_provider_version, "pulumi:providers:kubernetes::infercrane: recorded inputs differ"),
        (_pending_delete, "(pending delete)"),
    ],
    ids=["inputs", "missing", "extra", "pending", "provider-version", "pending-delete"],
)
def test_any_difference_between_checkpoint_and_registrations_is_named(values: dict[str, Any], mutate: Any, words: str) -> None:
    expected = _expected(values)
    state = _state_of(expected)
    mutate(state)
    reasons = urns.state_matches(state, expected)
    assert any(words in r for r in reasons), reasons


def test_a_changed_config_does_not_match_the_old_checkpoint(values: dict[str, Any]) -> None:
    old = _state_of(_expected(values))
    values["infercrane:replicas"][0]["gpu"] = "NVIDIA-H100-80GB-HBM3"
    assert urns.state_matches(old, _expected(values))


def test_an_empty_checkpoint_lists_everything_as_missing(values: dict[str, Any]) -> None:
    assert len(urns.state_matches({}, _expected(values))) == 4


def test_a_drifted_object_whose_record_pulumi_would_trust_needs_a_refresh(values: dict[str, Any]) -> None:
    expected = _expected(values)  # the provider, the component, its Deployment and Service
    state = _state_of(expected)
    name = "infercrane-935120ec8f148f03a1305f63"
    drift = [f"Deployment/{name}", f"Service/{name}"]
    assert urns.stale_records(state, expected, drift) == drift  # recorded exactly as registered: trusted
    _mutate_input(state)  # the Deployment's record differs: Pulumi applies it anyway
    assert urns.stale_records(state, expected, drift) == [f"Service/{name}"]
    assert urns.stale_records({"resources": []}, expected, drift) == []  # unrecorded: created
    assert urns.stale_records(_state_of(expected), expected, []) == []  # nothing drifted


def test_a_recorded_object_that_is_gone_needs_a_refresh_whatever_its_record(values: dict[str, Any]) -> None:
    """Pulumi would update it, and the provider's update of an object that is gone fails ("not
    found"): a rollback that removed a replica leaves its record behind, as does a kubectl delete."""
    expected = _expected(values)
    state = _state_of(expected)
    name = "infercrane-935120ec8f148f03a1305f63"
    _mutate_input(state)  # recorded with other inputs: an intended change
    gone = [f"Deployment/{name}", f"Service/{name}"]
    assert urns.stale_records(state, expected, gone) == [f"Service/{name}"]  # the drift alone: only the trusted one
    assert urns.stale_records(state, expected, gone, gone) == gone
    assert urns.stale_records({"resources": []}, expected, gone, gone) == []  # unrecorded: created
