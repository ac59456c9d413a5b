"""Program tier: the real program under Pulumi mocks (no engine, no cluster).

Asserts resource types, parents, the one explicit provider, the field manager, and that every
object's inputs equal the golden manifests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from infercrane.core import naming
from infercrane.core.load import loading
from infercrane.core.model import target
from infercrane.project import paths, stackfile
from infercrane.shell.channel import Channel
from infercrane.shell.gate import Handover
from tests.json_forms import as_a_store_keeps_it

ROOT = Path(__file__).resolve().parents[2]


class Recorder(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


def normalise(value: Any) -> Any:
    """Mocks see protobuf Struct values: integers arrive as floats."""
    return as_a_store_keeps_it(value)


def run_program(stack: str, values: dict[str, Any] | None = None) -> tuple[Recorder, dict[str, Any]]:
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="infercrane", stack=stack, preview=False)
    values = values if values is not None else stackfile.read_stack_values(paths.stack_file(stack, ROOT))
    pulumi.runtime.set_all_config({k: json.dumps(v) for k, v in values.items()})
    outputs: dict[str, Any] = {}

    from infercrane.shell import awaiting, program

    @pulumi.runtime.test
    def go() -> pulumi.Output[Any]:
        comps = program.build(
            loading.load(program.stack_values(), source=f"stacks/Pulumi.{stack}.yaml", env={}),
            stack,
            preflight=not awaiting.running_under_mocks(),
        )
        urns = [o.urn for c in comps for o in c.objects]
        return pulumi.Output.all(*urns).apply(lambda u: outputs.update(urns=u))

    go()
    return recorder, outputs


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(target.ENV_FIELDS) + ["PULUMI_K8S_ENABLE_PATCH_FORCE"]:
        monkeypatch.delenv(var, raising=False)


def by_type(rec: Recorder, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
    return [r for r in rec.resources if r.typ == typ]


@pytest.mark.usefixtures("clean_env")
def test_registers_one_component_per_replica_with_deployment_and_service() -> None:
    rec, _ = run_program("local")
    assert len(by_type(rec, "infercrane:index:Replica")) == 2
    assert len(by_type(rec, "kubernetes:apps/v1:Deployment")) == 2
    assert len(by_type(rec, "kubernetes:core/v1:Service")) == 2
    assert sorted(r.name for r in by_type(rec, "infercrane:index:Replica")) == sorted(
        naming.object_name(k) for k in ("qwen-kubernetes-rev-1-r0", "qwen-kubernetes-rev-1-r1")
    )


@pytest.mark.usefixtures("clean_env")
def test_children_are_parented_to_their_component() -> None:
    _, out = run_program("local")
    for urn in out["urns"]:
        assert "::infercrane:index:Replica$kubernetes:" in urn, urn


@pytest.mark.usefixtures("clean_env")
def test_one_explicit_provider_with_context_namespace_ssa_and_no_force() -> None:
    rec, _ = run_program("local")
    (prov,) = by_type(rec, "pulumi:providers:kubernetes")
    assert prov.name == "infercrane"
    inputs = prov.inputs
    assert inputs["context"] == "infercrane-local"
    assert inputs["namespace"] == "infercrane-system"
    assert str(inputs["enableServerSideApply"]).lower() == "true"
    assert "enablePatchForce" not in inputs
    assert json.loads(inputs["kubeClientSettings"]) == {"qps": 500, "burst": 1000}  # not pulumi-kubernetes' 50 and 120
    for r in rec.resources:
        if r.typ.startswith("kubernetes:"):
            assert r.provider and "pulumi:providers:kubernetes::infercrane::" in r.provider, (r.name, r.provider)


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("stack", ["local", "dev", "staging", "prod"])
def test_inputs_equal_golden_manifests(stack: str) -> None:
    rec, _ = run_program(stack)
    golden = list(yaml.safe_load_all((ROOT / "tests" / "golden" / "expected" / f"{stack}.yaml").read_text()))
    got = [
        normalise(dict(r.inputs))
        for r in rec.resources
        if r.typ.startswith("kubernetes:") and r.custom and "providers" not in r.typ
    ]
    # Registration is asynchronous: match objects by kind and name, not by order.
    got_by_id = {(g["kind"], g["metadata"]["name"]): g for g in got}
    assert sorted(got_by_id) == sorted((w["kind"], w["metadata"]["name"]) for w in golden)
    for want in golden:
        g = got_by_id[(want["kind"], want["metadata"]["name"])]
        assert g == want, f"{want['kind']}/{want['metadata']['name']} inputs differ from golden"
        assert g["metadata"]["annotations"]["pulumi.com/patchFieldManager"] == "infercrane-provider-v1"


@pytest.mark.usefixtures("clean_env")
def test_kserve_mode_registers_custom_resource() -> None:
    values = stackfile.read_stack_values(ROOT / "tests" / "golden" / "cases" / "kserve.yaml")
    rec, _ = run_program("kserve", values)
    (isvc,) = by_type(rec, "kubernetes:serving.kserve.io/v1beta1:InferenceService")
    assert normalise(isvc.inputs)["spec"]["predictor"]["minReplicas"] == 1
    assert not by_type(rec, "kubernetes:apps/v1:Deployment")


@pytest.mark.usefixtures("clean_env")
def test_bad_config_registers_nothing() -> None:
    values = stackfile.read_stack_values(paths.stack_file("local", ROOT))
    values["infercrane:kubernetes"] = dict(values["infercrane:kubernetes"], imageDigest="vllm/vllm-openai:latest")
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="infercrane", stack="local", preview=False)
    pulumi.runtime.set_all_config({k: json.dumps(v) for k, v in values.items()})
    from infercrane.shell import program

    with pytest.raises(pulumi.RunError) as exc:
        program.main()
    assert "stacks/Pulumi.local.yaml: infercrane:kubernetes.imageDigest: image 'vllm/vllm-openai:latest' is not pinned" in str(
        exc.value
    )
    assert recorder.resources == []


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("stack", ["local", "dev", "staging", "prod"])
def test_registrations_are_what_the_state_proven_plan_expects(stack: str) -> None:
    """The no-op proof (Observed.no_op_doubts) compares the state with urns.registrations: the
    program must register exactly those URNs, types and inputs, and the provider those inputs."""
    from importlib.metadata import version

    from infercrane.core import naming
    from infercrane.core.render import render_all
    from infercrane.core.state import urns

    rec, _ = run_program(stack)
    config = loading.load(
        stackfile.read_stack_values(paths.stack_file(stack, ROOT)), source=f"stacks/Pulumi.{stack}.yaml", env={}
    )
    provider = urns.provider_inputs(config.kubernetes, version("pulumi_kubernetes"))
    expected = urns.registrations(stack, render_all(config, naming.stack_identity("infercrane", stack)), provider)
    prefix = f"urn:pulumi:{stack}::infercrane::"
    registered = {r.name: (r.typ, normalise(dict(r.inputs))) for r in rec.resources}
    assert len(registered) == len(rec.resources)
    assert sorted(e.urn.removeprefix(prefix).rsplit("::", 1)[1] for e in expected) == sorted(registered)
    for e in expected:
        typ, inputs = registered[e.urn.rsplit("::", 1)[1]]
        assert typ == e.type
        if e.inputs is not None and typ != urns.PROVIDER_TYPE:
            assert inputs == e.inputs
    provider_seen = registered[urns.PROVIDER_NAME][1]
    assert {k: v for k, v in provider_seen.items() if k != "version"} == {k: v for k, v in provider.items() if k != "version"}


def test_a_prepared_run_registers_the_callers_render_as_handed_over() -> None:
    """A command that rendered and ran the preflight hands both over (``Channel.prepared``): the
    program registers exactly those manifests, without rendering the config again."""
    import copy
    import dataclasses

    from infercrane.core.render.manifests import render_checked
    from infercrane.live.stack.context import Prepared
    from infercrane.live.stack.preflight import Report
    from infercrane.shell import program

    values = stackfile.read_stack_values(paths.stack_file("local", ROOT))
    config = loading.load(values, source="stacks/Pulumi.local.yaml", env={})
    rendered = render_checked(config, "local")
    marked = copy.deepcopy(rendered[0].manifests)
    marked[0]["metadata"]["labels"]["handed-over"] = "yes"  # a render of the config would not have it
    handed = [dataclasses.replace(rendered[0], manifests=marked), rendered[1]]
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="infercrane", stack="local", preview=False)
    channel = Channel(driven=True, prepared=Prepared(handed, Report()))

    @pulumi.runtime.test
    def go() -> None:
        program.build(config, "local", preflight=False, channel=channel)

    go()
    deployments = {r.name: normalise(dict(r.inputs)) for r in by_type(recorder, "kubernetes:apps/v1:Deployment")}
    assert deployments[f"{rendered[0].name}-deployment"]["metadata"]["labels"]["handed-over"] == "yes"
    assert "handed-over" not in deployments[f"{rendered[1].name}-deployment"]["metadata"]["labels"]


def _gated(gate_action: Any) -> tuple[Recorder, Any, BaseException | None]:
    """Run the Automation API's form of the program (``program.run``) under mocks with a gate,
    which ``gate_action`` opens or calls off while the program waits."""
    import asyncio

    from pulumi.runtime.sync_await import _sync_await

    from infercrane.shell import program
    from infercrane.shell.gate import Gate

    values = stackfile.read_stack_values(paths.stack_file("local", ROOT))
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="infercrane", stack="local", preview=True)
    pulumi.runtime.set_all_config({k: json.dumps(v) for k, v in values.items()})
    config = loading.load(program.stack_values(), source="stacks/Pulumi.local.yaml", env={})
    gate = Gate()
    from infercrane.live.stack.context import StackContext

    no_cluster: Any = None  # under mocks the program makes no request
    channel = Channel(context=StackContext.of("local", config, no_cluster), driven=True, gate=gate)

    async def go() -> BaseException | None:
        waiting = asyncio.ensure_future(program.run(channel))
        await asyncio.sleep(0.05)  # the program is waiting at the gate now
        registered_before = [r.typ for r in recorder.resources]
        gate_action(gate)
        try:
            await waiting
            error = None
        except pulumi.RunError as exc:
            error = exc
        await pulumi.runtime.stack.wait_for_rpcs()
        recorder.before_gate = registered_before  # type: ignore[attr-defined]
        return error

    return recorder, channel, _sync_await(go())  # the loop the SDK's mocks run on


@pytest.mark.usefixtures("clean_env")
def test_a_gated_run_registers_its_provider_first_and_its_replicas_once_the_gate_opens() -> None:
    rec, channel, error = _gated(lambda gate: gate.open(Handover()))
    assert error is None and channel.error is None
    assert rec.before_gate == ["pulumi:providers:kubernetes"]  # type: ignore[attr-defined]
    assert len(by_type(rec, "kubernetes:apps/v1:Deployment")) == 2
    assert len(by_type(rec, "pulumi:providers:kubernetes")) == 1  # the same provider serves every object


@pytest.mark.usefixtures("clean_env")
def test_a_called_off_gated_run_registers_no_object_and_reports_the_callers_reason() -> None:
    from infercrane.core.errors import ClusterError

    reason = ClusterError("preflight could not check the cluster; nothing was applied")
    rec, channel, error = _gated(lambda gate: gate.call_off(reason))
    assert isinstance(error, pulumi.RunError) and "preflight could not check the cluster" in str(error)
    assert channel.error is reason
    assert [r.typ for r in rec.resources] == ["pulumi:providers:kubernetes"]


@pytest.mark.usefixtures("clean_env")
def test_a_run_in_process_sends_the_engine_none_of_the_sdks_debug_lines(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK's debug lines (three to five blocking RPCs per registration) are dropped in a run the
    Automation API drives; under mocks they would reach the mock engine's logger."""
    import logging

    with caplog.at_level(logging.DEBUG):
        rec, channel, error = _gated(lambda gate: gate.open(Handover()))
    assert error is None and len(by_type(rec, "kubernetes:apps/v1:Deployment")) == 2
    sent = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith(("registering resource", "resource registration"))
    ]
    assert sent == []
