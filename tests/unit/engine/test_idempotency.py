"""The stack's intent: what a recorded idempotency key is replayed for, and what makes it another."""

from __future__ import annotations


def test_a_rollout_policy_change_is_a_new_stack_intent_so_a_recorded_key_is_not_replayed_for_it() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.idempotency import stack_intent

    def cfg(**rollout: int) -> InferCraneConfig:
        target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64} | (
            {"rollout": rollout} if rollout else {}
        )
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})

    assert stack_intent(cfg()) == stack_intent(cfg(maxUnavailable=1, maxSurge=0))  # the defaults spelled out
    assert stack_intent(cfg()) != stack_intent(cfg(maxUnavailable=0, maxSurge=1))


def test_max_extra_gpus_is_part_of_the_stack_intent_only_when_set_so_earlier_records_still_replay() -> None:
    from infercrane.core import naming
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.core.render.intent import intent as replica_intent
    from infercrane.engine.idempotency import stack_intent

    def cfg(**rollout: int) -> InferCraneConfig:
        target = {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target | {"rollout": rollout}, "replicas": replicas})

    unset = cfg()
    # the intent as it was hashed before the setting existed: each endpoint's two policy fields
    earlier = naming.intent_hash(
        {
            "stack": ["c", "ns", replica_intent(unset, unset.replicas[0])],
            "rollout": {"e": {"max_unavailable": 1, "max_surge": 0}},
            "servingEvidence": unset.kubernetes.serving_evidence,
        }
    )
    assert stack_intent(unset) == earlier
    assert stack_intent(cfg(maxExtraGpus=1)) not in (earlier, stack_intent(cfg(maxExtraGpus=2)))


def test_a_key_recorded_under_serving_evidence_check_is_not_replayed_once_the_stack_requires_evidence() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.idempotency import stack_intent

    def cfg(**evidence: str) -> InferCraneConfig:
        target = {"context": "c", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64} | evidence
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target, "replicas": replicas})

    assert stack_intent(cfg()) == stack_intent(cfg(servingEvidence="check"))  # the default spelled out
    assert stack_intent(cfg()) != stack_intent(cfg(servingEvidence="require"))


def test_a_canary_policy_is_part_of_the_stack_intent_so_a_key_recorded_without_it_is_not_replayed() -> None:
    from infercrane.core.model.config import InferCraneConfig
    from infercrane.engine.idempotency import stack_intent

    def cfg(**rollout: object) -> InferCraneConfig:
        target = {"context": "c", "namespace": "ns", "imageDigest": "vllm/vllm-openai@sha256:" + "a" * 64}
        replicas = [{"key": "k", "model": "m/m", "name": "e", "gpu": "NVIDIA-L40S"}]
        return InferCraneConfig.model_validate({"kubernetes": target | {"rollout": rollout}, "replicas": replicas})

    without = stack_intent(cfg())
    assert stack_intent(cfg(canary={})) != without
    assert stack_intent(cfg(canary={"required": True})) not in (without, stack_intent(cfg(canary={})))
