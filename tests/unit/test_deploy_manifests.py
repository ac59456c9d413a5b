"""Static checks of deploy/kubernetes: allowed kinds, least privilege, and every verb we need."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infercrane.core.model.kinds import DRA_ROLE_NAME

ROOT = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
OPTIONAL_DIR = ROOT / "optional"
# The shipped files: what the seed promises about. deploy/kubernetes/optional/ only enriches evidence.
WARM_FIRST_DIR = ROOT / "warm-first"  # an opt-in write right of its own (rollout.warmFirst), never the seed's
FILES = sorted(p for p in ROOT.rglob("*.yaml") if OPTIONAL_DIR not in p.parents and WARM_FIRST_DIR not in p.parents)
OPTIONAL_FILES = sorted(OPTIONAL_DIR.glob("*.yaml"))
ALLOWED_KINDS = {"Namespace", "ServiceAccount", "Role", "RoleBinding", "HTTPRoute"}
# What the program and its server-side dry run need, per workload API.
NEEDED = {
    "infercrane-provider-deployment": {("apps", "deployments"), ("", "services")},
    "infercrane-provider-kserve": {("serving.kserve.io", "inferenceservices")},
    "infercrane-provider-dra": {("resource.k8s.io", "resourceclaimtemplates")},  # gpuAllocation: dra, beside either
}
VERBS_NEEDED = {"get", "list", "create", "patch", "delete"}
# The read-only plan's identity (deploy/kubernetes/base/plan-viewer-rbac.yaml): reads only.
PLAN_VIEWER = "infercrane-plan-viewer"
MUTATING = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate"}


def docs() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p in FILES for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]


def roles() -> list[dict[str, Any]]:
    return [d for _, d in docs() if d["kind"] in ("Role", "ClusterRole")]


def test_files_exist() -> None:
    names = {str(p.relative_to(ROOT)) for p in FILES}
    assert {
        "base/namespace.yaml",
        "base/service-accounts.yaml",
        "base/provider-rbac.yaml",
        "kserve/provider-rbac.yaml",
        "gateway-api/httproute.yaml",
    } <= names


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_only_allowed_kinds(path: Path) -> None:
    for d in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        assert d["kind"] in ALLOWED_KINDS, f"{path}: {d['kind']} is not an allowed kind"


def test_no_cluster_scoped_rbac() -> None:
    assert not [d for _, d in docs() if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_no_wildcards_secrets_pod_mutation_or_rbac_rights() -> None:
    for role in roles():
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(field, []), f"{role['metadata']['name']}: wildcard in {field}"
            assert "rbac.authorization.k8s.io" not in rule["apiGroups"]
            assert not {"update", "escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
            assert not {r for r in rule["resources"] if "/" in r}, "no subresources (pods/exec, …)"


def test_no_shipped_rule_names_pods_or_secrets_like_the_original_checker() -> None:
    """The seed: "contains no wildcard, Secret, Pod, cluster-wide, or RBAC mutation permission".
    As the original adapter's checker does, any rule naming pods or secrets fails, whatever its verbs."""
    for role in roles():
        for rule in role["rules"]:
            named = {r.split("/")[0] for r in rule["resources"]}
            assert not named & {"pods", "secrets"}, f"{role['metadata']['name']}: names {sorted(named & {'pods', 'secrets'})}"


# The one read right beyond the seed's, justified in the Role and docs/rbac.md: the Warning Events
# that say why a replica is not ready. Anything else must be a replica object.
READ_ONLY = {("", "events")}


def test_mutation_only_on_replica_objects_everything_else_read_only() -> None:
    replica_objects = set().union(*NEEDED.values())
    for role in roles():
        if role["metadata"]["name"] == PLAN_VIEWER:
            continue  # below: it writes nothing at all
        for rule in role["rules"]:
            pairs = {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
            if set(rule["verbs"]) & MUTATING:
                assert pairs <= replica_objects, f"{role['metadata']['name']}: mutation outside replica objects: {pairs}"
            else:
                assert set(rule["verbs"]) <= {"get", "list"}
                assert pairs <= READ_ONLY, f"{role['metadata']['name']}: undocumented read rights {pairs - READ_ONLY}"


@pytest.mark.parametrize("role_name", sorted(NEEDED), ids=sorted(NEEDED))
def test_every_needed_verb_is_granted(role_name: str) -> None:
    (role,) = [r for r in roles() if r["metadata"]["name"] == role_name]
    granted = {
        (g, res, v) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"] for v in rule["verbs"]
    }
    for group, resource in NEEDED[role_name]:
        for verb in VERBS_NEEDED:
            assert (group, resource, verb) in granted, f"{role_name} lacks {verb} on {group or 'core'}/{resource}"


def test_the_plan_viewer_may_only_get_and_list_the_replica_objects() -> None:
    (role,) = [r for r in roles() if r["metadata"]["name"] == PLAN_VIEWER]
    replica_objects = set().union(*NEEDED.values())
    for rule in role["rules"]:
        assert set(rule["verbs"]) == {"get", "list"}, rule
        assert {(g, r) for g in rule["apiGroups"] for r in rule["resources"]} <= replica_objects, rule
    (binding,) = [d for _, d in docs() if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == PLAN_VIEWER]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": PLAN_VIEWER, "namespace": "infercrane-system"}]


def test_roles_are_bound_to_the_control_plane_account() -> None:
    bindings = [d for _, d in docs() if d["kind"] == "RoleBinding" and d["roleRef"]["name"] != PLAN_VIEWER]
    assert {b["roleRef"]["name"] for b in bindings} == set(NEEDED)
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "infercrane-control-plane", "namespace": "infercrane-system"}]


def test_runtime_account_mounts_no_token() -> None:
    accounts = {d["metadata"]["name"]: d for _, d in docs() if d["kind"] == "ServiceAccount"}
    assert accounts["infercrane-runtime"]["automountServiceAccountToken"] is False
    assert accounts["infercrane-control-plane"]["automountServiceAccountToken"] is True


def test_every_rbac_rule_is_commented() -> None:
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        if "kind: Role\n" in text:
            after = text.split("rules:", 1)[1]
            assert after.lstrip().startswith("#"), f"{path}: rules need a comment saying who needs them"


def test_bootstrap_objects_are_never_inventoried() -> None:
    for _, d in docs():
        assert d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "infercrane-bootstrap"


def test_optional_node_reader_only_reads_nodes() -> None:
    docs = list(yaml.safe_load_all((OPTIONAL_DIR / "node-reader.yaml").read_text(encoding="utf-8")))
    assert [d["kind"] for d in docs] == ["ClusterRole", "ClusterRoleBinding"]
    assert docs[0]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    assert docs[1]["roleRef"]["name"] == docs[0]["metadata"]["name"]


def test_httproute_targets_the_gateway_with_placeholders() -> None:
    (route,) = [d for _, d in docs() if d["kind"] == "HTTPRoute"]
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "infercrane-gateway", "port": 8080}]
    assert all(h.startswith("REPLACE_WITH_") for h in route["spec"]["hostnames"])


@pytest.mark.parametrize("path", OPTIONAL_FILES, ids=[p.name for p in OPTIONAL_FILES])
def test_optional_roles_are_read_only_and_never_touch_secrets(path: Path) -> None:
    for d in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if d["kind"] in ("Role", "ClusterRole"):
            for rule in d["rules"]:
                assert set(rule["verbs"]) <= {"get", "list"}, f"{path.name}: {rule['verbs']}"
                assert "secrets" not in rule["resources"] and "*" not in rule["resources"]


def test_doctor_checks_exactly_the_shipped_and_optional_rights() -> None:
    """doctor's required rights are the shipped Roles' rules; its optional ones the optional files'."""
    from infercrane.live.doctor import rights

    def granted(paths: list[Path], kinds: tuple[str, ...]) -> dict[str, set[tuple[str, str, str]]]:
        out: dict[str, set[tuple[str, str, str]]] = {}
        for p in paths:
            for d in yaml.safe_load_all(p.read_text(encoding="utf-8")):
                if d["kind"] in kinds:
                    out[d["metadata"]["name"]] = {
                        (v, g, r)
                        for rule in d["rules"]
                        for g in rule["apiGroups"]
                        for r in rule["resources"]
                        for v in rule["verbs"]
                    }
        return out

    shipped = granted(FILES, ("Role",))
    shipped.pop(PLAN_VIEWER)  # the deploying identity's Roles here; the plan viewer's rights are checked above
    assert set(rights.SHIPPED_ROLES.values()) | {DRA_ROLE_NAME} == set(shipped)
    for api, role in rights.SHIPPED_ROLES.items():
        assert set(rights.required_rights(api)) | set(rights.shipped_extra_rights(api)) == shipped[role]
        assert set(rights.required_rights(api, "dra")) - set(rights.required_rights(api)) == shipped[DRA_ROLE_NAME]
    optional = granted(OPTIONAL_FILES, ("Role",))
    assert set(rights.OPTIONAL_RIGHTS) == set().union(*optional.values())


def test_doctor_checks_the_plan_viewer_for_exactly_the_reads_its_role_grants() -> None:
    from infercrane.core.model.kinds import RESOURCE_CLAIM_TEMPLATE, WORKLOAD_APIS
    from infercrane.live.doctor import rights

    (role,) = [r for r in roles() if r["metadata"]["name"] == PLAN_VIEWER]
    assert (ROOT.parent.parent / rights.PLAN_VIEWER_FILE).is_file()
    granted = {(v, g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    kinds = [k for api in WORKLOAD_APIS.values() for k in api.kinds] + [RESOURCE_CLAIM_TEMPLATE]
    assert granted == {(v, k.group, k.plural) for k in kinds for v in rights.PLAN_VERBS}
    assert not set(rights.PLAN_VERBS) & set(rights.WRITE_VERBS)


def test_the_prefetcher_may_only_create_and_delete_pods_and_doctor_asks_for_it_only_under_warm_first() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.live.doctor import rights
    from infercrane.live.status import prefetch

    (path,) = sorted(WARM_FIRST_DIR.glob("*.yaml"))
    assert str(path.relative_to(ROOT.parent.parent)) == prefetch.PREFETCHER
    role, binding = yaml.safe_load_all(path.read_text(encoding="utf-8"))
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "infercrane-control-plane", "namespace": "infercrane-system"}
    ]
    replicas = [{"key": "r0", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
    target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
    plain = InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})
    warm = InferCraneConfig.model_validate({"kubernetes": target | {"rollout": {"warmFirst": True}}, "replicas": replicas})
    asked = {(v, r, need) for v, _, r, need in rights.access_checks(warm)} - {
        (v, r, need) for v, _, r, need in rights.access_checks(plain)
    }
    assert asked == {("create", "pods", "warm-first"), ("delete", "pods", "warm-first")}
