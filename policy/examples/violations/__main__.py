"""A plain pulumi-kubernetes program, not InferCrane's: one Deployment per policy it breaks.

`pulumi preview --policy-pack ../..` must block every one of them. Its stack configures the
default provider to render YAML to a directory (`kubernetes:renderYamlToDirectory`) instead of
talking to a cluster, so the preview needs none, and to force conflicts
(`kubernetes:enablePatchForce: "true"`), which the pack blocks on the provider itself.
"""

import pulumi_kubernetes as k8s

DIGEST = "vllm/vllm-openai@sha256:" + "c" * 64
GPU = {"nvidia.com/gpu": "1"}


def deployment(name, container, pod=None, labels=None, annotations=None):
    k8s.apps.v1.Deployment(
        name,
        metadata={"name": name, "labels": labels or {"app": name}, "annotations": annotations or {}},
        spec={
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": DIGEST, **container}], **(pod or {})},
            },
        },
    )


deployment("tagged", {"image": "vllm/vllm-openai:latest"})  # image-digest
deployment(
    "guessed-gpu", {"resources": {"limits": GPU, "requests": GPU}}, {"nodeSelector": {"nvidia.com/gpu.product": "H100"}}
)  # gpu-product-selector
deployment(
    "uneven-gpu",
    {"resources": {"limits": GPU, "requests": {"nvidia.com/gpu": "2"}}},
    {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
)  # gpu-limits
deployment("forced", {}, annotations={"pulumi.com/patchForce": "true"})  # no-patch-force (and the provider's flag)
deployment("literal-key", {"env": [{"name": "OPENAI_API_KEY", "value": "sk-not-a-real-key"}]})  # no-secret-literals
deployment(
    "claims-ours",
    {"resources": {"limits": GPU, "requests": {**GPU, "memory": "32Gi"}}},  # memory requested, never limited
    {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
    labels={"app": "claims-ours", "app.kubernetes.io/managed-by": "infercrane"},
)  # infercrane-ownership, infercrane-pod-contract
k8s.apiextensions.CustomResource(  # the SDK has no resource.k8s.io/v1 class
    "guessed-claim",
    api_version="resource.k8s.io/v1",
    kind="ResourceClaimTemplate",
    metadata={"name": "guessed-claim"},
    spec={
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "count": 1,
                            "selectors": [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "H100"'}}],
                        },
                    }
                ]
            }
        }
    },
)  # gpu-claim-product: "H100" is no productName the driver publishes ("NVIDIA H100 80GB HBM3", ...)

GUESSED = [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "H100"'}}]
KNOWN = [{"cel": {"expression": 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L40S"'}}]
k8s.apiextensions.CustomResource(
    "guessed-alternative",
    api_version="resource.k8s.io/v1",
    kind="ResourceClaimTemplate",
    metadata={"name": "guessed-alternative"},
    spec={
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "firstAvailable": [
                            {"name": "l40s", "deviceClassName": "gpu.nvidia.com", "count": 1, "selectors": KNOWN},
                            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": 1, "selectors": GUESSED},
                        ],
                    }
                ]
            }
        }
    },
)  # gpu-claim-product: an alternative of firstAvailable guesses
k8s.resource.v1beta1.ResourceClaimTemplate(
    "guessed-v1beta1",
    metadata={"name": "guessed-v1beta1"},
    spec={
        "spec": {
            "devices": {"requests": [{"name": "gpus", "device_class_name": "gpu.nvidia.com", "count": 1, "selectors": GUESSED}]}
        }
    },
)  # gpu-claim-product: the SDK's v1beta1 type, whose request is its own exact request
k8s.resource.v1beta2.ResourceClaim(
    "guessed-claim-object",
    metadata={"name": "guessed-claim-object"},
    spec={
        "devices": {
            "requests": [{"name": "gpus", "exactly": {"device_class_name": "gpu.nvidia.com", "count": 1, "selectors": GUESSED}}]
        }
    },
)  # gpu-claim-product: a ResourceClaim a pod would name by resourceClaimName
