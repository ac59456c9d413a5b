from __future__ import annotations

from infercrane.core import naming


def test_name_is_prefix_plus_24_hex_of_sha256_of_key() -> None:
    # Fixed vector: sha256("qwen-kubernetes-rev-1-r0")[:24]
    assert naming.object_name("qwen-kubernetes-rev-1-r0") == "infercrane-935120ec8f148f03a1305f63"


def test_labels_and_selector() -> None:
    labels = naming.labels("k")
    assert labels == {
        "app.kubernetes.io/name": "infercrane-runtime",
        "app.kubernetes.io/instance": naming.object_name("k"),
        "app.kubernetes.io/managed-by": "infercrane",
        "infercrane.dev/external-key-hash": naming.key_hash("k"),
    }
    assert naming.selector("k") == {"app.kubernetes.io/instance": naming.object_name("k")}


def test_intent_hash_is_stable_and_order_independent() -> None:
    a = naming.intent_hash({"b": 1, "a": [1, 2]})
    assert a == naming.intent_hash({"a": [1, 2], "b": 1})
    assert a == "sha256:" + __import__("hashlib").sha256(b'{"a":[1,2],"b":1}').hexdigest()
    assert a != naming.intent_hash({"a": [2, 1], "b": 1})


def _owned(key: str = "k", stack: str = "infercrane/dev") -> dict:
    return {
        "metadata": {
            "namespace": "ns",
            "labels": naming.labels(key),
            "annotations": naming.ownership_annotations(key, "sha256:x", stack),
        }
    }


def test_object_with_exact_metadata_is_owned() -> None:
    assert naming.ownership_mismatches(_owned(), key="k", namespace="ns", stack="infercrane/dev") == []


def test_object_of_another_stack_is_not_owned() -> None:
    assert naming.ownership_mismatches(_owned(stack="infercrane/prod"), key="k", namespace="ns", stack="infercrane/dev") == [
        "annotation infercrane.dev/stack is 'infercrane/prod', expected 'infercrane/dev'"
    ]


def test_object_without_labels_is_not_owned() -> None:
    reasons = naming.ownership_mismatches({"metadata": {"namespace": "ns"}}, key="k", namespace="ns", stack="s")
    assert "label app.kubernetes.io/managed-by is missing" in reasons
    assert "annotation infercrane.dev/external-key is missing" in reasons


def test_key_annotation_must_match_exactly() -> None:
    obj = _owned()
    obj["metadata"]["annotations"]["infercrane.dev/external-key"] = "k "
    assert naming.ownership_mismatches(obj, key="k", namespace="ns", stack="infercrane/dev") == [
        "annotation infercrane.dev/external-key is 'k ', expected 'k'"
    ]


def test_not_owned_reads_the_key_from_the_objects_own_annotation() -> None:
    key, stack = "k-r0", "infercrane/dev"
    obj = {
        "metadata": {
            "namespace": "ns",
            "labels": naming.labels(key),
            "annotations": naming.ownership_annotations(key, "sha256:" + "0" * 64, stack),
        }
    }
    assert naming.not_owned(obj, namespace="ns", stack=stack) == []
    assert naming.not_owned(obj, namespace="ns", stack="infercrane/prod") == [
        "annotation infercrane.dev/stack is 'infercrane/dev', expected 'infercrane/prod'"
    ]
    del obj["metadata"]["annotations"][naming.ANNOTATION_KEY]
    assert naming.not_owned(obj, namespace="ns", stack=stack) == ["annotation infercrane.dev/external-key is missing"]


def test_a_controllers_child_carrying_our_copied_metadata_is_not_ours() -> None:
    """KServe copies an InferenceService's labels and annotations onto the predictor Deployment it owns."""
    child = _owned()
    child["metadata"]["ownerReferences"] = [{"kind": "InferenceService", "name": "infercrane-x", "controller": True}]
    assert naming.ownership_mismatches(child, key="k", namespace="ns", stack="infercrane/dev") == [
        "it is owned by InferenceService/infercrane-x (a controller's child)"
    ]
    assert naming.not_owned(child, namespace="ns", stack="infercrane/dev") != []
