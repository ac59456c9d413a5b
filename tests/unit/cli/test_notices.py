"""What a command says on stderr before it acts: the cluster target, and how its GPUs are allocated."""

from __future__ import annotations

import argparse
import copy
from typing import Any

import pytest

from infercrane.cli import notices
from infercrane.core.load import loading


@pytest.mark.parametrize(
    ("allocation", "said"),
    [
        ("label", "stack dev: context infercrane-local, namespace default, workload API deployment\n"),
        (
            "dra",
            "stack dev: context infercrane-local, namespace default, workload API deployment, "
            "GPUs claimed by DRA (DeviceClass gpu.nvidia.com)\n",
        ),
    ],
)
def test_a_command_names_its_target_and_gpus_claimed_by_dra_from_the_allocation_table(
    values: dict[str, Any], allocation: str, said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notices.stackfile, "env_overrides", lambda stack: [])
    doc = copy.deepcopy(values)
    doc["infercrane:kubernetes"] |= {"gpuAllocation": allocation, "namespace": "default"}
    config = loading.load(doc, source="stacks/Pulumi.dev.yaml", env={})
    notices.disclose(argparse.Namespace(json=False), "dev", acting=config)
    assert capsys.readouterr().err.splitlines()[-1] + "\n" == said
