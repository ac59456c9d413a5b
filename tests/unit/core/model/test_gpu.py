from __future__ import annotations

import pytest

from infercrane.core.model.gpu import KNOWN_PRODUCTS, gpu_problem


@pytest.mark.parametrize("value", KNOWN_PRODUCTS, ids=KNOWN_PRODUCTS)
def test_accepts_every_known_product(value: str) -> None:
    assert gpu_problem(value) is None


@pytest.mark.parametrize("value", ["NVIDIA-L40S-SHARED", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"], ids=["time-sliced", "mig"])
def test_accepts_sharing_variants_of_known_products(value: str) -> None:
    assert gpu_problem(value) is None


def test_refuses_lowercase_value_and_names_the_exact_one_without_substituting() -> None:
    assert gpu_problem("nvidia-l40s") == (
        "GPU 'nvidia-l40s' is not a known product-label value (did you mean 'NVIDIA-L40S'? it is never substituted for you)"
    )


def test_refuses_family_name() -> None:
    problem = gpu_problem("H100")
    assert problem is not None and problem.startswith("GPU 'H100' is not a known product-label value")


def test_refuses_sharing_suffix_on_unknown_base() -> None:
    assert gpu_problem("NVIDIA-X9-SHARED") is not None


def test_stack_can_extend_the_table() -> None:
    assert gpu_problem("NVIDIA-RTX-PRO-6000") is not None
    assert gpu_problem("NVIDIA-RTX-PRO-6000", ("NVIDIA-RTX-PRO-6000",)) is None
