"""gpuAllocation: dra in the pure core: the product table's two spellings, config refusals by their
text, the rendered claim template and pod, the intent (label mode unchanged), the guards and the
policy's reading of a template, and the GPUs a live replica claims."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane.core.errors import ConfigError
from infercrane.core.load import loading
from infercrane.core.model import gpu
from infercrane.core.plan.workload import claimed_gpus
from infercrane.core.render import guards
from infercrane.core.render.intent import intent
from infercrane.core.render.manifests import gpus_of, render_checked
from infercrane.live.stack.running import live_replicas
from infercrane.shell.policy import judge

SRC = "stacks/Pulumi.dev.yaml"


def dra(values: dict[str, Any], **target: Any) -> dict[str, Any]:
    out = copy.deepcopy(values)
    out["infercrane:kubernetes"] |= {"gpuAllocation": "dra"} | target
    return out


def problems(values: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        loading.load(values, source=SRC, env={})
    return [p.render() for p in exc.value.problems]


@pytest.mark.parametrize("label", gpu.KNOWN_PRODUCTS)
def test_every_known_product_has_a_product_name_that_a_selector_names_and_reads_back(label: str) -> None:
    name = gpu.PRODUCT_NAMES[label]
    assert " " in name and name.startswith("NVIDIA ")
    assert gpu.selected_product(gpu.selector(name)) == name
    assert gpu.label_of(name) == label


def test_the_two_spellings_differ_in_more_than_spaces_so_neither_is_derived() -> None:
    assert gpu.PRODUCT_NAMES["NVIDIA-A100-80GB-PCIe"] == "NVIDIA A100 80GB PCIe"
    assert gpu.PRODUCT_NAMES["NVIDIA-A100-SXM4-40GB"] == "NVIDIA A100-SXM4-40GB"  # NVML keeps this dash


def test_the_product_name_spelling_as_a_gpu_is_refused_with_the_label_value() -> None:
    assert gpu.gpu_problem("NVIDIA A100 80GB PCIe") == (
        "GPU 'NVIDIA A100 80GB PCIe' is the DRA productName spelling; write the label value 'NVIDIA-A100-80GB-PCIe' "
        "(gpuAllocation dra selects on the productName for you)"
    )


def test_a_selector_of_another_shape_or_driver_names_no_product() -> None:
    assert gpu.selected_product('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")') is None
    assert gpu.selected_product('device.attributes["gpu.example.com"].productName == "NVIDIA L4"') is None


def test_a_dra_stack_renders_a_claim_template_per_replica_and_pods_that_claim_it(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0] |= {"gpu": "NVIDIA-H100-80GB-HBM3", "gpuCount": 4}
    config = loading.load(dra(values), source=SRC, env={})
    (r,) = render_checked(config, "dev")
    dep, svc, template = r.manifests
    assert [m["kind"] for m in r.manifests] == ["Deployment", "Service", "ResourceClaimTemplate"]
    assert template["metadata"]["name"] == dep["metadata"]["name"] == r.name
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request == {
        "name": "gpus",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 4,
            "selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'}}],
        },
    }
    pod = dep["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": r.name}]
    assert "nodeSelector" not in pod, "no product label: a DRA-only node has none"
    (container,) = pod["containers"]
    assert container["resources"] == {"claims": [{"name": "gpus"}]}, "no nvidia.com/gpu"
    assert "--tensor-parallel-size" in container["args"]


def test_a_dra_stack_keeps_cpu_and_memory_and_the_device_class_is_configurable(values: dict[str, Any]) -> None:
    config = loading.load(dra(values, gpuDeviceClass="h100.nvidia.example", resources={}), source=SRC, env={})
    dep, _, template = render_checked(config, "dev")[0].manifests
    res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert set(res) == {"limits", "requests", "claims"} and "nvidia.com/gpu" not in res["limits"]
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "h100.nvidia.example"


def test_label_mode_is_the_default_and_its_intent_is_unchanged_a_switch_to_dra_changes_it(values: dict[str, Any]) -> None:
    label = loading.load(values, source=SRC, env={})
    explicit = copy.deepcopy(values)
    explicit["infercrane:kubernetes"]["gpuAllocation"] = "label"
    assert label.kubernetes.gpu_allocation == "label"
    written = loading.load(explicit, source=SRC, env={})
    assert intent(label, label.replicas[0]) == intent(written, written.replicas[0])  # (the golden files: same objects)
    switched = loading.load(dra(values), source=SRC, env={})
    assert intent(label, label.replicas[0]) != intent(switched, switched.replicas[0])
    assert label.kubernetes.object_kinds == ("Deployment", "Service")


def test_a_sharing_variant_is_refused_under_dra_with_where_and_why(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0]["gpu"] = "NVIDIA-L40S-SHARED"
    assert problems(dra(values)) == [
        "stacks/Pulumi.dev.yaml: infercrane:replicas[0].gpu (replica 'qwen-kubernetes-rev-1-r0'): GPU 'NVIDIA-L40S-SHARED' is "
        "a time-slicing or MIG variant, which only the device plugin's label names; under gpuAllocation dra a replica "
        "claims whole GPUs\n    fix: use the whole GPU's label value, or gpuAllocation label for a shared or MIG GPU"
    ]


def test_an_extra_label_value_without_its_product_name_is_refused_under_dra(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0]["gpu"] = "NVIDIA-RTX-PRO-6000"
    out = problems(dra(values, gpuProducts=["NVIDIA-RTX-PRO-6000"]))
    assert out == [
        "stacks/Pulumi.dev.yaml: infercrane:replicas[0].gpu (replica 'qwen-kubernetes-rev-1-r0'): GPU 'NVIDIA-RTX-PRO-6000' "
        "has no DRA productName in InferCrane's table\n    fix: add NVIDIA-RTX-PRO-6000: '<the productName your DRA driver "
        "publishes>' to infercrane:kubernetes.gpuProductNames"
    ]
    named = dra(values, gpuProductNames={"NVIDIA-RTX-PRO-6000": "NVIDIA RTX PRO 6000 Blackwell Server Edition"})
    config = loading.load(named, source=SRC, env={})
    template = render_checked(config, "dev")[0].manifests[2]
    assert '"NVIDIA RTX PRO 6000 Blackwell Server Edition"' in str(template["spec"])


def test_an_unknown_gpu_is_refused_with_a_did_you_mean_never_substituted_under_dra(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0]["gpu"] = "NVIDIA-L40"
    (out,) = problems(dra(values))
    assert "GPU 'NVIDIA-L40' is not a known product-label value (did you mean 'NVIDIA-L40S'? it is never substituted" in out


def test_a_product_name_that_cel_cannot_quote_is_refused(values: dict[str, Any]) -> None:
    (out,) = problems(dra(values, gpuProductNames={"NVIDIA-X": 'NVIDIA "X"'}))
    assert "infercrane:kubernetes.gpuProductNames" in out and "are not product names" in out


def _rendered(values: dict[str, Any]) -> list[dict[str, Any]]:
    config = loading.load(dra(values), source=SRC, env={})
    return [copy.deepcopy(m) for m in render_checked(config, "dev")[0].manifests]


def test_the_guards_pass_a_rendered_dra_replica_and_catch_a_template_of_an_unknown_product(values: dict[str, Any]) -> None:
    dep, svc, template = _rendered(values)
    assert guards.check_all([dep, svc, template], guards.Gpus()) == []
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly["selectors"] = [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "L40S"'}}]
    (v,) = guards.check(template, guards.Gpus())
    assert v.startswith(f"ResourceClaimTemplate/{template['metadata']['name']}: request 'gpus': productName 'L40S' is not in")
    exactly["selectors"] = []
    assert guards.check(template, guards.Gpus()) == [
        f"ResourceClaimTemplate/{template['metadata']['name']}: request 'gpus': selects no GPU product "
        "(one selector naming its productName is needed)"
    ]


def test_the_guards_catch_a_pod_claim_that_names_no_template(values: dict[str, Any]) -> None:
    dep, _, _ = _rendered(values)
    dep["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "shared"}]
    (v,) = guards.check(dep, guards.Gpus())
    assert v.endswith("container runtime: claim 'gpus' names no ResourceClaimTemplate of the pod")


def test_the_policy_judges_any_programs_claim_template_of_the_gpu_class_only() -> None:
    def template(device_class: str, expression: str) -> dict[str, Any]:
        exactly = {"deviceClassName": device_class, "count": 1, "selectors": [{"cel": {"expression": expression}}]}
        return {"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": exactly}]}}}}

    token = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
    guessed = template("gpu.nvidia.com", 'device.attributes["gpu.nvidia.com"].productName == "H100"')
    (message,) = judge("gpu-claim-product", token, guessed, {})
    assert "productName 'H100' is not in the GPU table" in message and "fix: select device.attributes" in message
    assert judge("gpu-claim-product", token, template("nic.example.com", "true"), {}) == [], "not a GPU class: not judged"
    named = template("gpu.nvidia.com", 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA X"')
    assert judge("gpu-claim-product", token, named, {"gpuProductNames": {"NVIDIA-X": "NVIDIA X"}}) == []


GUESSED = 'device.attributes["gpu.nvidia.com"].productName == "H100"'
KNOWN = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L40S"'
# A claim's devices (v1beta2, as v1): one exact request whose selector guesses the productName.
GUESSED_EXACTLY = {
    "devices": {
        "requests": [
            {
                "name": "g",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1, "selectors": [{"cel": {"expression": GUESSED}}]},
            }
        ]
    }
}


@pytest.mark.parametrize(
    ("token", "spec", "where"),
    [
        # v1: one of a firstAvailable list guesses (any alternative may be the one allocated)
        (
            "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate",
            {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "g",
                                "firstAvailable": [
                                    {
                                        "name": "big",
                                        "deviceClassName": "gpu.nvidia.com",
                                        "count": 1,
                                        "selectors": [{"cel": {"expression": KNOWN}}],
                                    },
                                    {
                                        "name": "any",
                                        "deviceClassName": "gpu.nvidia.com",
                                        "count": 1,
                                        "selectors": [{"cel": {"expression": GUESSED}}],
                                    },
                                ],
                            }
                        ]
                    }
                }
            },
            "request 'g' subrequest 'any'",
        ),
        # v1beta1: the request is its own exact request (no `exactly`)
        (
            "kubernetes:resource.k8s.io/v1beta1:ResourceClaimTemplate",
            {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "g",
                                "deviceClassName": "gpu.nvidia.com",
                                "count": 1,
                                "selectors": [{"cel": {"expression": GUESSED}}],
                            }
                        ]
                    }
                }
            },
            "request 'g'",
        ),
        # v1beta2: `exactly`, as v1
        ("kubernetes:resource.k8s.io/v1beta2:ResourceClaimTemplate", {"spec": GUESSED_EXACTLY}, "request 'g'"),
        # a ResourceClaim made directly (its requests at spec.devices), which a pod names by resourceClaimName
        ("kubernetes:resource.k8s.io/v1beta2:ResourceClaim", GUESSED_EXACTLY, "request 'g'"),
    ],
    ids=["first-available", "v1beta1-template", "v1beta2-template", "resource-claim"],
)
def test_the_policy_judges_every_shape_and_version_of_a_gpu_claim(token: str, spec: dict[str, Any], where: str) -> None:
    (message,) = judge("gpu-claim-product", token, {"metadata": {"name": "t"}, "spec": spec}, {})
    assert f"{where}: productName 'H100' is not in the GPU table" in message, message


def test_a_live_dra_replica_holds_what_its_template_claims_of_its_product(values: dict[str, Any]) -> None:
    values["infercrane:replicas"][0]["gpuCount"] = 2
    config = loading.load(dra(values), source=SRC, env={})
    dep, svc, template = render_checked(config, "dev")[0].manifests
    name = dep["metadata"]["name"]
    assert claimed_gpus(dep, {name: template}) == (2, "NVIDIA-L40S")
    assert claimed_gpus(dep, {}) == (0, ""), "a template it cannot read claims nothing it knows of"
    live_dep = copy.deepcopy(dep) | {
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
    }
    live_dep["metadata"]["generation"] = 1
    live = {("Deployment", name): live_dep, ("Service", name): svc, ("ResourceClaimTemplate", name): template}
    (m,) = live_replicas(config, live, "infercrane/dev")
    assert (m.gpus, m.product, m.state) == (2, "NVIDIA-L40S (DRA)", "settled")


def test_the_guards_take_the_targets_gpu_naming(values: dict[str, Any]) -> None:
    config = loading.load(dra(values, gpuDeviceClass="gpu.example.com"), source=SRC, env={})
    assert gpus_of(config.kubernetes).device_class == "gpu.example.com"


def test_a_promotion_reads_a_dra_replicas_gpu_from_its_live_claim_template(values: dict[str, Any]) -> None:
    from infercrane.core.promotion import unlike_live

    config = loading.load(dra(values), source=SRC, env={})
    dep, _, template = render_checked(config, "dev")[0].manifests
    (r,) = config.replicas
    assert unlike_live(config, r, dep, {dep["metadata"]["name"]: template}) == []
    assert unlike_live(config, r, dep, {}) == ["gpu None (the file: 'NVIDIA-L40S')", "gpuCount None (the file: 1)"], (
        "no template read"
    )


def test_the_planes_dra_node_carries_no_product_label_or_gpu_resource_and_its_slice_is_the_drivers_shape() -> None:
    from infercrane.local import dra
    from infercrane.local.bootstrap import node_manifest

    spec = {"name": "kwok-dra-a100-0", "gpuProduct": "NVIDIA-A100-80GB-PCIe", "gpus": 2, "gpuAllocation": "dra"}
    node = node_manifest(spec)
    assert "nvidia.com/gpu.product" not in node["metadata"]["labels"]
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert node["spec"]["taints"][0]["key"] == "nvidia.com/gpu", "tainted as the GPU operator taints GPU nodes"
    labelled = node_manifest(spec | {"gpuAllocation": "label"})
    assert labelled["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-80GB-PCIe"
    assert labelled["status"]["allocatable"]["nvidia.com/gpu"] == "2"

    sl = dra.resource_slice(spec)["spec"]
    assert (sl["driver"], sl["nodeName"], sl["pool"]["name"]) == ("gpu.nvidia.com", "kwok-dra-a100-0", "kwok-dra-a100-0")
    assert [d["name"] for d in sl["devices"]] == ["gpu-0", "gpu-1"]
    attributes = sl["devices"][0]["attributes"]
    assert attributes["productName"] == {"string": "NVIDIA A100 80GB PCIe"} and attributes["type"] == {"string": "gpu"}
    assert attributes["uuid"] != sl["devices"][1]["attributes"]["uuid"]
    (selector,) = dra.device_class()["spec"]["selectors"]
    assert (
        selector["cel"]["expression"] == "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    )


def test_doctor_fails_a_cluster_that_does_not_serve_the_dra_api_with_how_to_go_on() -> None:
    from infercrane.live.client import failures
    from infercrane.live.doctor import capacity

    class NoDra:
        def raw_get(self, path: str) -> dict[str, Any]:
            assert path == "/apis/resource.k8s.io/v1"
            raise failures.NotFound("the server could not find the requested resource", code=404)

    check = capacity.dra_api(NoDra())  # type: ignore[arg-type]
    assert (check.status, check.detail) == (
        "fail",
        "resource.k8s.io/v1 is not served (Dynamic Resource Allocation is GA from Kubernetes 1.34)",
    )
    assert check.hint == "use gpuAllocation: label on this cluster, or upgrade it to Kubernetes 1.34 or later"


def test_a_switch_from_label_to_dra_is_planned_as_the_move_it_is_between_two_pools(values: dict[str, Any]) -> None:
    """A device-plugin GPU freed by the old form is no DRA device for the new one: the plan counts
    each pool apart and shows both (where the new GPUs come from), never one pool of the product."""
    from infercrane.live.stack.preflight import Report
    from infercrane.live.stack.running import plan_rollout

    values["infercrane:replicas"] = [dict(values["infercrane:replicas"][0], key=f"qwen-r{i}") for i in range(2)]
    label = loading.load(values, source=SRC, env={})
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for r in render_checked(label, "dev"):
        dep = copy.deepcopy(r.manifests[0])
        dep["metadata"]["generation"] = 1
        dep["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
        live[("Deployment", r.name)] = dep
    switched = loading.load(dra(values), source=SRC, env={})
    report = Report(live=live, restarts={r.name for r in render_checked(switched, "dev")})
    (e,) = plan_rollout(switched, render_checked(switched, "dev"), report, "infercrane/dev").endpoints
    assert dict(e.peak_by_product) == {"NVIDIA-L40S": 2, "NVIDIA-L40S (DRA)": 2}, e
    assert (e.gpus_before, e.gpus_after, len(e.waves), e.lowest_ready) == (2, 2, 2, 1)
