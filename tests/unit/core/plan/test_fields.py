"""The read-only plan's comparison: what a server-side apply would do, judged from the live object
and its managedFields alone (infercrane.core.plan.fields)."""

from __future__ import annotations

import copy
from typing import Any

from infercrane.core.plan.actions import Action
from infercrane.core.plan.fields import compare, owned

ME = "infercrane-provider-v1"

RENDERED: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d", "namespace": "ns", "annotations": {"infercrane.dev/intent-hash": "sha256:a"}},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {"name": "engine", "image": "img@sha256:1", "resources": {"limits": {"nvidia.com/gpu": 1}}},
                ]
            }
        },
    },
}

MINE = {
    "f:metadata": {"f:annotations": {"f:infercrane.dev/intent-hash": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:template": {
            "f:spec": {
                "f:containers": {
                    'k:{"name":"engine"}': {
                        ".": {},
                        "f:name": {},
                        "f:image": {},
                        "f:resources": {"f:limits": {"f:nvidia.com/gpu": {}}},
                    }
                }
            }
        },
    },
}


def live(**changes: Any) -> dict[str, Any]:
    """The object as the API server returns it: defaulted fields added, quantities as strings."""
    obj = copy.deepcopy(RENDERED)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container |= {"terminationMessagePath": "/dev/termination-log", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    obj["spec"]["progressDeadlineSeconds"] = 600
    obj["metadata"]["managedFields"] = [{"manager": ME, "operation": "Apply", "fieldsV1": MINE}]
    for path, value in changes.items():
        node = obj
        *parents, last = path.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    return obj


def test_an_object_holding_every_rendered_value_is_unchanged_whatever_the_server_defaulted() -> None:
    assert compare(RENDERED, live(), ME).action is Action.SAME
    assert compare(RENDERED, None, ME).action is Action.CREATE


def test_a_rendered_value_that_differs_is_an_update_and_a_pod_template_change_restarts_pods() -> None:
    moved = copy.deepcopy(RENDERED)
    moved["spec"]["template"]["spec"]["containers"][0]["image"] = "img@sha256:2"
    got = compare(moved, live(), ME)
    assert (got.action, got.restarts) == (Action.UPDATE, True)
    assert got.why == ('.spec.template.spec.containers[name="engine"].image',)
    scaled = copy.deepcopy(RENDERED)
    scaled["spec"]["replicas"] = 2
    assert (compare(scaled, live(), ME).action, compare(scaled, live(), ME).restarts) == (Action.UPDATE, False)


def test_a_field_we_owned_and_no_longer_render_is_an_update_the_apply_would_remove_it() -> None:
    fewer = copy.deepcopy(RENDERED)
    del fewer["spec"]["template"]["spec"]["containers"][0]["resources"]
    got = compare(fewer, live(), ME)
    assert got.action is Action.UPDATE
    assert '.spec.template.spec.containers[name="engine"].resources.limits.nvidia.com/gpu' in got.why


def test_another_manager_owning_a_rendered_field_with_another_value_is_a_conflict() -> None:
    taken = live(**{"spec.replicas": 3})
    taken["metadata"]["managedFields"].append(
        {"manager": "kubectl-scale", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    )
    got = compare(RENDERED, taken, ME)
    assert got.conflicts == ('conflict with "kubectl-scale" (Update): .spec.replicas',)
    shared = live()  # the same value: server-side apply shares the field, no conflict
    shared["metadata"]["managedFields"].append(
        {"manager": "other", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    )
    assert compare(RENDERED, shared, ME).conflicts == ()
    status = live()  # a subresource's manager (the controller's status) never conflicts with the object
    status["metadata"]["managedFields"].append(
        {"manager": "kcm", "operation": "Update", "subresource": "status", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    )
    assert compare(RENDERED, status, ME).conflicts == ()


def test_fields_v1_names_each_leaf_and_an_element_itself() -> None:
    paths = set(owned(MINE))
    assert ("f:spec", "f:replicas") in paths
    assert ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"engine"}') in paths  # its "."


SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "s", "namespace": "ns"},
    "spec": {"selector": {"app": "a", "infercrane.dev/key": "k"}, "ports": [{"name": "http", "port": 8000}]},
}


def test_a_key_another_manager_added_to_an_atomic_selector_is_a_change_and_a_conflict() -> None:
    """Issue #65, 1: a Service's selector is an atomic map. `kubectl patch` adding a key makes the
    apply replace the whole map -- a change, and a conflict with the patch's manager, who owns it
    whole -- where the granular comparison said unchanged (and the deploy proved it so)."""
    patched = copy.deepcopy(SERVICE)
    patched["spec"]["selector"]["team"] = "other"
    patched["metadata"]["managedFields"] = [
        {"manager": ME, "operation": "Apply", "fieldsV1": {"f:spec": {"f:selector": {}, "f:ports": {}}}},
        {"manager": "kubectl-patch", "operation": "Update", "fieldsV1": {"f:spec": {"f:selector": {}}}},
    ]
    got = compare(SERVICE, patched, ME)
    assert got.action is Action.UPDATE and got.why == (".spec.selector",)
    assert got.conflicts == ('conflict with "kubectl-patch" (Update): .spec.selector',)
    untouched = copy.deepcopy(SERVICE)
    untouched["metadata"]["managedFields"] = patched["metadata"]["managedFields"][:1]
    assert compare(SERVICE, untouched, ME).action is Action.SAME


def test_another_managers_args_are_an_atomic_list_owned_whole() -> None:
    rendered = copy.deepcopy(RENDERED)
    rendered["spec"]["template"]["spec"]["containers"][0]["args"] = ["--port", "8000"]
    theirs = live(**{"spec.template.spec.containers.0.args": ["--port", "8000", "--debug"]})
    theirs["metadata"]["managedFields"].append(
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"engine"}': {"f:args": {}}}}}}},
        }
    )
    got = compare(rendered, theirs, ME)
    assert got.action is Action.UPDATE and got.restarts
    assert got.conflicts == ('conflict with "kubectl-edit" (Update): .spec.template.spec.containers[name="engine"].args',)


def test_a_quantity_the_server_stored_in_another_exact_unit_is_unchanged_and_another_value_is_an_update() -> None:
    """Issue #65, 3: `shmSize: 16384Mi` is stored as 16Gi, 0.5Gi as 512Mi, a memory of 500M as
    500M: compared as text, every pull request's read-only plan showed restarts that never come."""
    rendered = copy.deepcopy(RENDERED)
    spec = rendered["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16384Mi"}}]
    spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1, "memory": "0.5Gi"}, "requests": {"cpu": "1500m"}}
    stored = live(
        **{
            "spec.template.spec.volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
            "spec.template.spec.containers.0.resources": {
                "limits": {"nvidia.com/gpu": "1", "memory": "512Mi"},
                "requests": {"cpu": "1500m"},
            },
        }
    )
    assert compare(rendered, stored, ME).action is Action.SAME
    bigger = copy.deepcopy(stored)
    bigger["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "32Gi"
    assert compare(rendered, bigger, ME).why == ('.spec.template.spec.volumes[name="shm"].emptyDir.sizeLimit',)
    # Equal in value, stored apart: the API server keeps a decimal number of bytes as it was sent,
    # so applying 16384Mi over a stored 17179869184 rewrites it (found by tests/integration/test_fields_oracle.py).
    decimal = copy.deepcopy(stored)
    decimal["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "17179869184"
    assert compare(rendered, decimal, ME).action is Action.UPDATE


def test_an_element_another_manager_added_to_a_keyed_list_is_theirs_and_changes_nothing() -> None:
    """Found by the field manager's referee (tests/integration/test_fields_oracle.py): an env var a
    mutating controller added, a sidecar container, a Service port -- elements of lists the schema
    keys by name (or port and protocol) -- are not ours: our apply leaves them, and changes nothing.
    Compared by length, every such object was planned as an update."""
    stored = live()
    container = stored["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [*(container.get("env") or []), {"name": "INJECTED", "value": "1"}]
    stored["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "proxy:1"})
    assert compare(RENDERED, stored, ME).action is Action.SAME


def test_a_quantity_another_manager_owns_conflicts_unless_sent_as_it_is_stored() -> None:
    """The field manager compares what an apply sends with what is stored, as text: 16384Mi over
    another manager's stored 16Gi is refused as a conflict, though it would change nothing."""
    rendered = copy.deepcopy(RENDERED)
    rendered["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "16384Mi"}}
    stored = live(**{"spec.template.spec.containers.0.resources": {"limits": {"memory": "16Gi"}}})
    stored["metadata"]["managedFields"].append(
        {
            "manager": "kubectl-edit",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "fieldsV1": {
                "f:spec": {
                    "f:template": {
                        "f:spec": {"f:containers": {'k:{"name":"engine"}': {"f:resources": {"f:limits": {"f:memory": {}}}}}}
                    }
                }
            },
        }
    )
    got = compare(rendered, stored, ME)
    assert got.conflicts == (
        'conflict with "kubectl-edit" (Update): .spec.template.spec.containers[name="engine"].resources.limits.memory',
    )
    rendered["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "16Gi"}}
    assert compare(rendered, stored, ME).conflicts == ()


def test_replicas_owned_through_the_scale_subresource_conflict_with_our_apply() -> None:
    """`kubectl scale` and an autoscaler own .spec.replicas through /scale: owned all the same, and
    an apply of another count is refused (found by the field manager's referee; the comparison
    skipped every entry of a subresource)."""
    scaled = live(**{"spec.replicas": 3})
    scaled["metadata"]["managedFields"].append(
        {"manager": "kubectl-scale", "operation": "Update", "subresource": "scale", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    )
    assert compare(RENDERED, scaled, ME).conflicts == (
        'conflict with "kubectl-scale" (Update, subresource scale): .spec.replicas',
    )


def test_an_int_or_string_is_not_its_text() -> None:
    """A Service's targetPort 8000 is not "8000": applying the one over the other changes the object."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"ports": [{"name": "http", "port": 8000, "targetPort": "8000", "protocol": "TCP"}]},
    }
    stored = copy.deepcopy(service)
    stored["spec"]["ports"][0]["targetPort"] = 8000
    assert compare(service, stored, ME).action is Action.UPDATE
    assert compare(stored, stored, ME).action is Action.SAME


def test_a_field_we_stop_rendering_that_another_manager_also_owns_stays_and_changes_nothing() -> None:
    """Found in 10^5 generated cases (tests/integration/test_fields_oracle.py, case 81259): a platform
    team applied the memory limit we rendered, with the same value -- both own it. Our next release
    no longer renders it: only our ownership goes; the field, theirs too, stays."""
    stored = live(**{"spec.template.spec.containers.0.resources": {"limits": {"nvidia.com/gpu": "1", "memory": "16Gi"}}})
    memory = {
        "f:spec": {
            "f:template": {"f:spec": {"f:containers": {'k:{"name":"engine"}': {"f:resources": {"f:limits": {"f:memory": {}}}}}}}
        }
    }
    ours = copy.deepcopy(MINE)
    ours["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"engine"}']["f:resources"]["f:limits"]["f:memory"] = {}
    stored["metadata"]["managedFields"] = [
        {"manager": ME, "operation": "Apply", "fieldsV1": ours},
        {"manager": "platform-apply", "operation": "Apply", "fieldsV1": memory},
    ]
    assert compare(RENDERED, stored, ME).action is Action.SAME
    stored["metadata"]["managedFields"].pop()  # ours alone: the apply removes it
    assert compare(RENDERED, stored, ME).why == ('.spec.template.spec.containers[name="engine"].resources.limits.memory',)


def _inference_service(memory: str, env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "kserve-container", "image": "img@sha256:1", "resources": {"limits": {"memory": memory}}}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "isvc", "namespace": "ns"},
        "spec": {"predictor": {"containers": [container]}},
    }


ISVC_MINE = {"f:spec": {"f:predictor": {"f:containers": {}}}}  # an atomic list: owned whole, as one leaf


def entry(manager: str, operation: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "fieldsV1": fields}


def test_an_inference_service_keeps_a_quantitys_text_so_another_form_of_it_is_an_update() -> None:
    """A custom resource is stored as sent (KServe's CRD, no Go type): 16Gi over a stored 16384Mi
    changes the object, where a Deployment's would compare as unchanged."""
    stored = _inference_service("16384Mi")
    stored["metadata"]["managedFields"] = [entry(ME, "Apply", ISVC_MINE)]
    assert compare(_inference_service("16384Mi"), stored, ME).action is Action.SAME
    assert compare(_inference_service("16Gi"), stored, ME).action is Action.UPDATE


def test_a_predictors_containers_are_one_atomic_list_an_injected_env_var_owns_them_whole() -> None:
    """The CRD gives ``spec.predictor.containers`` no list type: atomic. A controller that added an
    env var by an update owns the whole list: our apply of the list without it conflicts there."""
    theirs = {"f:spec": {"f:predictor": {"f:containers": {}}}}
    injected = _inference_service("16Gi", env=[{"name": "INJECTED", "value": "1"}])
    injected["metadata"]["managedFields"] = [entry(ME, "Apply", ISVC_MINE), entry("mutator", "Update", theirs)]
    got = compare(_inference_service("16Gi"), injected, ME)
    assert got.action is Action.UPDATE
    assert got.conflicts == ('conflict with "mutator" (Update): .spec.predictor.containers',)


def test_what_kserves_webhook_fills_in_a_predictor_container_changes_nothing_and_another_value_does() -> None:
    """KServe's defaulter gives a predictor container its configured cpu and memory (1, 2Gi) on
    every apply where the InferenceService sets none -- inside the atomic `containers`, as ours.
    Found on the plane (the golden corpus applied as InferCrane): a no-op compared as an update."""
    filled = _inference_service("16Gi")
    filled["spec"]["predictor"]["containers"][0]["resources"] = {
        "limits": {"memory": "16Gi", "cpu": "1"},
        "requests": {"cpu": "1", "memory": "2Gi"},
    }
    filled["metadata"]["managedFields"] = [entry(ME, "Apply", ISVC_MINE)]
    assert compare(_inference_service("16Gi"), filled, ME).action is Action.SAME
    filled["spec"]["predictor"]["containers"][0]["resources"]["requests"]["memory"] = "8Gi"  # not the webhook's
    assert compare(_inference_service("16Gi"), filled, ME).action is Action.UPDATE
