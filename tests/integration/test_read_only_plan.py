"""A plan that needs no write right: `infercrane plan --read-only` as the shipped plan viewer
(deploy/kubernetes/base/plan-viewer-rbac.yaml: get, list and watch on the replica objects, nothing
else), on the local plane whose API server writes a real audit log -- and the log shows that
identity made no write request at all.

Its answers are the full plan's on the revisions a pull request brings: nothing to do, a digest
change (every replica configured, in waves), a new key, a removed key, and a foreign field manager
on a field InferCrane renders (refused, as a deploy would be). It writes nothing to the backend
either: the backend's files and the stack files are byte for byte as they were (size, mtime)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Service, ServiceAccount

from infercrane.core import naming
from infercrane.local.components import AUDIT_LOG
from infercrane.local.plane import Plane
from tests.integration.conftest import ROOT, Project, cli, plain_pulumi, replica

NS = "infercrane-system"
VIEWER = f"system:serviceaccount:{NS}:infercrane-plan-viewer"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
D1 = "vllm/vllm-openai@sha256:" + "1" * 64


def viewer_env(plane: Plane, admin: Client, tmp_path: Path) -> dict[str, str]:
    """A kubeconfig of the plan viewer's service account (a short-lived token) and the deploy's
    environment pointing at it: the plan runs as that identity and nothing else."""
    token = admin.create(
        ServiceAccount.Token(  # type: ignore[call-arg]
            metadata=ObjectMeta(name="infercrane-plan-viewer", namespace=NS),
            spec=TokenRequestSpec(audiences=[], expirationSeconds=3600),
        ),
        "infercrane-plan-viewer",
        namespace=NS,
    )
    plane_config = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = plane_config["clusters"][0]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "plan-viewer", "user": {"token": token.status.token}}],
        "contexts": [{"name": "plan-viewer", "context": {"cluster": cluster["name"], "user": "plan-viewer", "namespace": NS}}],
        "current-context": "plan-viewer",
    }
    path = tmp_path / "viewer.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return {"INFERCRANE_KUBERNETES_KUBECONFIG": str(path), "INFERCRANE_KUBERNETES_CONTEXT": "plan-viewer"}


def requests_by(plane: Plane, user: str) -> list[dict[str, Any]]:
    lines = (plane.state / AUDIT_LOG).read_text().splitlines()
    return [e for e in map(json.loads, lines) if (e.get("user") or {}).get("username") == user]


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (the backend, the stack files): size and modification time."""
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(root.rglob("*")) if f.is_file()}


def plan(project: Project, stack: str, env: dict[str, str]) -> Any:
    """``plan --read-only --json`` as the viewer; the backend and the stack files are as they were."""
    before = files(project.root / ".infercrane" / "pulumi-state") | files(project.root / "stacks")
    done = cli(project, "plan", "--stack", stack, "--read-only", "--json", env=env)
    after = files(project.root / ".infercrane" / "pulumi-state") | files(project.root / "stacks")
    assert before and after == before, "the read-only plan wrote to the backend or a stack file"
    return done


def test_the_read_only_plan_answers_as_the_full_plan_and_the_audit_log_shows_no_write(
    project: Project, admin: Client, plane: Plane, tmp_path: Path
) -> None:
    stack = "itreadonly"
    keys = [f"it-ro-r{i}" for i in range(3)]
    project.stack(stack, [replica(k) for k in keys], rollout={"maxUnavailable": 1, "maxSurge": 0})
    assert cli(project, "deploy", "--stack", stack).returncode == 0
    env = viewer_env(plane, admin, tmp_path)
    before = len(requests_by(plane, VIEWER))

    def both(*revision: Any, **settings: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        project.stack(stack, *revision, **settings)
        read_only = plan(project, stack, env)
        full = cli(project, "plan", "--stack", stack, "--json", "--full-preview")
        assert read_only.returncode in (0, 3), read_only.stderr
        assert read_only.returncode == full.returncode, (read_only.stdout, full.stdout)
        return json.loads(read_only.stdout), json.loads(full.stdout)

    def actions(doc: dict[str, Any]) -> dict[str, str]:
        return {r["key"]: r["action"] for r in doc["replicas"]}

    def waves(doc: dict[str, Any]) -> Any:  # each endpoint's waves, lowest ready and GPUs before, after and at the peak
        return doc["rollout"]

    rollout = {"maxUnavailable": 1, "maxSurge": 0}
    same, full = both([replica(k) for k in keys], rollout=rollout)
    assert set(actions(same).values()) == {"same"} and actions(same) == actions(full)
    assert same["basis"] == "read-only"

    moved, full = both([replica(k) for k in keys], rollout=rollout, imageDigest=D1)  # a digest change
    assert set(actions(moved).values()) == {"update"} and actions(moved) == actions(full)
    assert waves(moved) == waves(full) and len(moved["rollout"]["endpoints"][0]["waves"]) == 3
    comment = cli(project, "plan", "--stack", stack, "--read-only", "--markdown", env=env)  # the pull request's comment
    assert comment.returncode == 3, comment.stderr
    assert comment.stdout.startswith(f"### InferCrane plan: stack `{stack}`\n\n**3 replica(s) change in 1 of 1 endpoint(s)**")
    assert "| `qwen` | 3 of 3: 3 configure | 3 | 2 of 3 | 3 → 3 (3) | - |" in comment.stdout, comment.stdout
    assert "> not checkable read-only: admission webhooks and Pod Security" in comment.stdout
    (tmp_path / "comment.md").write_text(comment.stdout)

    grown, full = both([replica(k) for k in [*keys, "it-ro-r3"]], rollout=rollout)  # a new key
    assert actions(grown) == actions(full) and actions(grown)["it-ro-r3"] == "create"

    shrunk, full = both([replica(k) for k in keys[:2]], rollout=rollout)  # a removed key
    assert actions(shrunk) == actions(full) and actions(shrunk)["it-ro-r2"] == "delete"

    reordered, full = both([replica(k) for k in reversed(keys)], rollout=rollout)  # the same replicas, reordered
    assert set(actions(reordered).values()) == {"same"} and actions(reordered) == actions(full)

    cut = [keys[0], keys[1], "it-ro-n2"]  # a cutover: a new key takes an old key's place
    cutover, full = both([replica(k) for k in cut], rollout=rollout)
    assert actions(cutover) == actions(full) == {**{k: "same" for k in keys[:2]}, "it-ro-n2": "create", "it-ro-r2": "delete"}
    assert waves(cutover) == waves(full)

    gpu = [replica(k, gpu="NVIDIA-H100-80GB-HBM3") if k == keys[0] else replica(k) for k in keys]  # another GPU product
    moved_gpu, full = both(gpu, rollout=rollout)
    assert actions(moved_gpu) == actions(full) and actions(moved_gpu)[keys[0]] == "update"
    assert waves(moved_gpu) == waves(full)

    # Another field manager took a field InferCrane renders (kubectl scale, an autoscaler):
    # applying would conflict -- the read-only plan refuses, naming it, as the deploy's preflight does.
    name = naming.object_name(keys[0])
    admin.patch(Deployment, name, {"spec": {"replicas": 2}}, namespace=NS, field_manager="kubectl-scale")
    project.stack(stack, [replica(k) for k in keys], rollout=rollout)
    refused = cli(project, "plan", "--stack", stack, "--read-only", env=env)
    assert refused.returncode != 0 and f'Deployment {NS}/{name}: conflict with "kubectl-scale" (Update): .spec.replicas' in (
        refused.stdout + refused.stderr
    ), refused.stderr
    full_refused = cli(project, "plan", "--stack", stack)
    assert full_refused.returncode == refused.returncode and ".spec.replicas" in full_refused.stdout + full_refused.stderr

    seen = requests_by(plane, VIEWER)[before:]
    assert seen, "the audit log records the viewer's requests"
    assert {e["verb"] for e in seen} <= {"get", "list", "watch"}, sorted({(e["verb"], e["requestURI"]) for e in seen})
    assert not [e for e in seen if e["verb"] in WRITES]

    # The policy pack on the read-only plan, and plain `pulumi preview` under its setting, as the
    # same identity: the program's preflight is read-only, but the provider's preview asks for a
    # server-side dry run first (pulumi-kubernetes 4.25), which RBAC refuses, and then diffs inputs
    # (pulumi-kubernetes #2419): nothing is written -- every write-verb request is a refused dry run.
    admin.patch(Deployment, name, {"spec": {"replicas": 1}}, namespace=NS, field_manager="kubectl-scale")
    project.stack(stack, [replica(k) for k in keys], rollout=rollout, imageDigest=D1)
    before = len(requests_by(plane, VIEWER))
    backend = project.root / ".infercrane" / "pulumi-state"
    before_pack = files(backend)  # (the engine may add the stack file's encryptionsalt: a file of the checkout)
    pack = cli(project, "plan", "--stack", stack, "--read-only", "--policy-pack", str(ROOT / "policy"), env=env)
    assert pack.returncode == 3, pack.stdout + pack.stderr
    assert files(backend) == before_pack, "the policy pack's preview wrote to the backend"
    # Plain `pulumi preview` under the same setting, as the same identity: the same changes.
    pulumi = plain_pulumi(project, stack, env | {"INFERCRANE_PLAN_READ_ONLY": "1"})
    previewed = pulumi("preview", "--diff")
    assert previewed.returncode == 0, previewed.stdout + previewed.stderr
    assert "preflight: not checkable read-only" in previewed.stdout + previewed.stderr, previewed.stderr
    assert previewed.stdout.count("~ kubernetes:apps/v1:Deployment") == 3, previewed.stdout
    refused_up = pulumi("up", "--yes")
    assert refused_up.returncode != 0 and "INFERCRANE_PLAN_READ_ONLY=1 is set, which plans with get and list only" in (
        refused_up.stdout + refused_up.stderr
    )
    attempts = [e for e in requests_by(plane, VIEWER)[before:] if e["verb"] in WRITES]
    assert attempts and all("dryRun=All" in e["requestURI"] and e["responseStatus"]["code"] == 403 for e in attempts), [
        (e["verb"], e["requestURI"], e["responseStatus"]) for e in attempts
    ]
    assert cli(project, "destroy", "--stack", stack).returncode == 0


def test_a_key_added_to_a_services_selector_out_of_band_is_refused_by_both_plans_and_the_deploy(
    project: Project, admin: Client, plane: Plane, tmp_path: Path
) -> None:
    """Issue #65, 1: the selector is an atomic map; `kubectl patch` adding a key to it makes the
    apply replace the map, against the patch's manager, who owns it whole. Both plans said no
    changes and the deploy proved the Service unchanged by its live form, leaving it routing
    elsewhere; now both plans and the deploy refuse the conflict, naming it."""
    stack, key = "itselector", "it-sel-r0"
    project.stack(stack, [replica(key)])
    assert cli(project, "deploy", "--stack", stack).returncode == 0
    name = naming.object_name(key)
    admin.patch(Service, name, {"spec": {"selector": {"team": "other"}}}, namespace=NS, field_manager="kubectl-patch")
    said = f'Service {NS}/{name}: conflict with "kubectl-patch" (Update): .spec.selector'
    read_only = cli(project, "plan", "--stack", stack, "--read-only", env=viewer_env(plane, admin, tmp_path))
    assert read_only.returncode == 1 and said in read_only.stdout + read_only.stderr, read_only.stdout + read_only.stderr
    full = cli(project, "plan", "--stack", stack)
    assert full.returncode == 1 and "kubectl-patch" in full.stdout + full.stderr and ".spec.selector" in full.stderr, full.stderr
    deployed = cli(project, "deploy", "--stack", stack)
    assert deployed.returncode == 1 and "kubectl-patch" in deployed.stderr and "nothing was applied" in deployed.stderr
    assert admin.get(Service, name, namespace=NS).spec.selector["team"] == "other", "refused: nothing applied"
    admin.patch(Service, name, {"spec": {"selector": {"team": None}}}, namespace=NS, field_manager="kubectl-patch")
    assert cli(project, "destroy", "--stack", stack).returncode == 0


def test_a_read_only_plan_with_policy_packs_refuses_a_stack_that_does_not_exist_and_writes_nothing(
    project: Project, admin: Client, plane: Plane, tmp_path: Path
) -> None:
    """Issue #65, 6: its preview selected the stack, creating it -- a backend write."""
    stack = "itnostack"
    project.stack(stack, [replica("it-nostack-r0")])
    backend = project.root / ".infercrane" / "pulumi-state"
    backend.mkdir(parents=True, exist_ok=True)
    before = files(backend)
    env = viewer_env(plane, admin, tmp_path)
    refused = cli(project, "plan", "--stack", stack, "--read-only", "--policy-pack", str(ROOT / "policy"), env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"stack {stack} does not exist in the backend; a read-only command creates none" in refused.stderr, refused.stderr
    assert files(backend) == before, "the read-only plan wrote to the backend"


def test_every_golden_case_applied_as_infercrane_compares_as_unchanged_and_a_changed_field_as_configure(admin: Client) -> None:
    """The render corpus (every shipped stack and edge case of tests/golden) applied by server-side
    apply as InferCrane's field manager: read back -- defaulted by the API server, its quantities
    canonical, KServe's and DRA's objects through their admission -- the read-only comparison says
    each is unchanged; the same objects with another intent are configured, and a Deployment with
    another image restarts its pods."""
    from lightkube.models.meta_v1 import ObjectMeta as Meta
    from lightkube.resources.core_v1 import Namespace

    from infercrane.core.load import loading
    from infercrane.core.plan.actions import Action
    from infercrane.core.plan.fields import compare
    from infercrane.core.render.manifests import render_checked
    from infercrane.live.client.cluster import as_dict, resource_for
    from infercrane.project import stackfile
    from tests.golden.cases import case_files

    ns = "it-corpus"
    admin.apply(Namespace(metadata=Meta(name=ns)), field_manager="it")
    gc = admin._client
    wrong: list[str] = []
    for name, path in sorted(case_files().items()):
        config = loading.load(stackfile.read_stack_values(path), source=path.name, env={})
        for r in render_checked(config, name):
            for m in r.manifests:
                m = {**m, "metadata": {**m["metadata"], "namespace": ns}}
                br = gc.prepare_request(
                    "patch",
                    res=resource_for(m),
                    name=m["metadata"]["name"],
                    namespace=ns,
                    obj=m,
                    headers={"Content-Type": "application/apply-patch+yaml"},
                    params={"fieldManager": naming.FIELD_MANAGER, "force": "false"},
                )
                live = as_dict(gc.handle_response("patch", gc.send(gc.build_adapter_request(br)), br))
                got = compare(m, live, naming.FIELD_MANAGER)
                if got.action is not Action.SAME or got.conflicts:
                    wrong.append(f"{name}: {m['kind']}/{m['metadata']['name']}: {got.action} {got.why} {got.conflicts}")
                changed = json.loads(json.dumps(m))
                changed["metadata"]["annotations"][naming.ANNOTATION_INTENT] = "sha256:another"
                if compare(changed, live, naming.FIELD_MANAGER).action is not Action.UPDATE:
                    wrong.append(f"{name}: {m['kind']}/{m['metadata']['name']}: another intent is not an update")
                if m["kind"] == "Deployment":
                    changed["spec"]["template"]["spec"]["containers"][0]["image"] += "0"
                    if not compare(changed, live, naming.FIELD_MANAGER).restarts:
                        wrong.append(f"{name}: {m['kind']}/{m['metadata']['name']}: another image restarts no pod")
    assert wrong == [], "\n".join(wrong)


def test_doctor_read_only_passes_the_plan_viewer_and_fails_an_identity_that_may_write(
    project: Project, admin: Client, plane: Plane, tmp_path: Path
) -> None:
    stack = "itrodoctor"
    project.stack(stack, [replica("it-rod-r0")])
    env = viewer_env(plane, admin, tmp_path)
    viewer = cli(project, "doctor", "--kubernetes", "--read-only", "--stack", stack, env=env)
    assert viewer.returncode == 0, viewer.stdout + viewer.stderr
    assert "can list deployments.apps" in viewer.stdout and "cannot patch deployments.apps" in viewer.stdout
    full = cli(project, "plan", "--stack", stack, env=env)  # the full plan dry-runs: patch, which it may not
    assert full.returncode == 1 and "cannot patch resource" in full.stderr
    assert "fix: to plan with get and list only, run `infercrane plan --read-only`" in full.stderr, full.stderr
    deployer = cli(project, "doctor", "--kubernetes", "--read-only", "--stack", stack)  # the deploying identity
    assert deployer.returncode == 1
    assert "a read-only plan's identity holds no write right (a pull request's code runs with it)" in deployer.stdout
    assert "give the job an identity bound only to deploy/kubernetes/base/plan-viewer-rbac.yaml" in deployer.stdout


def test_the_field_manager_referee_answers_as_the_plane_api_server_does(admin: Client) -> None:
    """The referee of the read-only comparison (tools/go/ssa-oracle: the API server's own field
    manager run as a program, tests/integration/test_fields_oracle.py) against the real API server:
    generated histories replayed on the plane -- applies (forced where the referee forces them),
    updates (a PUT of the whole object) -- then our apply as a server-side dry run. The conflicts
    it refuses and whether it changes the object are the referee's. A history the API server's
    validation refuses (a selector its template does not match: the referee does not validate) is
    counted apart, never judged."""
    from infercrane.project.tools import find_tool
    from tests import fields_cases
    from tests.integration.test_serving import namespace_with_evidence

    ns = "it-referee"
    namespace_with_evidence(admin, ns)
    generated = list(
        fields_cases.cases(60, seed=7, kinds=("Deployment", "Service"))
    )  # built-in kinds: the plane's KServe controller acts on an InferenceService
    for i, c in enumerate(generated):  # each case on an object of its own, in the plane's namespace
        for o in [*(h["object"] for h in c["history"]), c["final"]["object"]]:
            o["metadata"] = {**o["metadata"], "name": f"referee-{i}", "namespace": ns}
    answers = fields_cases.ask(find_tool("ssa-oracle"), generated)
    refused: list[int] = []
    disagree: list[str] = []
    judged = 0
    try:
        judged = _replay(admin, ns, generated, answers, refused, disagree)
    finally:  # their pods hold the plane's GPUs: the next test of this worker needs them
        for res in (Deployment, Service):
            for obj in admin.list(res, namespace=ns):
                admin.delete(res, obj.metadata.name, namespace=ns)
    print(f"referee on the plane: {judged} of {len(generated)} judged, {len(refused)} refused by validation")
    assert judged >= 40, f"only {judged} of {len(generated)} judged ({len(refused)} refused by validation)"
    assert not disagree, "\n".join(disagree)


def _replay(admin: Client, ns: str, generated: list[Any], answers: list[Any], refused: list[int], disagree: list[str]) -> int:
    """Each case's history replayed on the plane and our apply as a dry run, against the referee's
    answer: the number judged (``refused``: refused by validation; ``disagree``: what differs)."""
    from lightkube import codecs
    from lightkube.core.exceptions import ApiError
    from lightkube.types import PatchType

    from tests import fields_cases

    judged = 0

    def content(obj: dict[str, Any]) -> Any:
        meta = obj.get("metadata") or {}
        return (meta.get("labels"), meta.get("annotations"), obj.get("spec"))

    for i, (c, answer) in enumerate(zip(generated, answers, strict=True)):
        res = Deployment if c["kind"] == "Deployment" else Service
        name = f"referee-{i}"
        try:
            for n, h in enumerate(c["history"]):
                if h["op"] == "apply":  # a partial object: sent as it is
                    admin.patch(res, name, h["object"], namespace=ns, patch_type=PatchType.APPLY, field_manager=h["manager"],
                                force=bool(h.get("force")))  # fmt: skip
                    continue
                obj = codecs.from_dict(h["object"])
                if n == 0:
                    admin.create(obj, field_manager=h["manager"])
                else:
                    for _ in range(10):  # the controllers write its status meanwhile: a PUT of an old version is refused
                        obj.metadata.resourceVersion = admin.get(res, name, namespace=ns).metadata.resourceVersion
                        try:
                            admin.replace(obj, field_manager=h["manager"])
                            break
                        except ApiError as exc:
                            if exc.status.code != 409:
                                raise
        except ApiError as exc:
            if exc.status.code == 422:
                refused.append(i)
                continue
            raise
        before = admin.get(res, name, namespace=ns).to_dict()
        try:
            after = admin.patch(
                res,
                name,
                c["final"]["object"],
                namespace=ns,
                patch_type=PatchType.APPLY,
                field_manager=fields_cases.OURS,
                dry_run=True,
            ).to_dict()
            conflicts: frozenset[tuple[str, str]] = frozenset()
            changed = content(after) != content(before)
        except ApiError as exc:
            if exc.status.code == 422:  # the merged object fails validation (two ports named http)
                refused.append(i)
                continue
            assert exc.status.code == 409, exc.status.message
            conflicts = frozenset(
                (str(cause.message).removeprefix("conflict with ").split(" using ")[0].strip('"'), str(cause.field))
                for cause in exc.status.details.causes
            )
            changed = False
        judged += 1
        if conflicts != answer.conflicts or (not conflicts and changed != answer.changed):
            disagree.append(
                f"case {i} ({c['kind']}): the API server {sorted(conflicts)} changed={changed}; "
                f"the referee {sorted(answer.conflicts)} changed={answer.changed}"
            )
    return judged
