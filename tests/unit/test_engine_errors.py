"""Automation API failures become one message with the next step (no engine needed)."""

from __future__ import annotations

import pytest
from pulumi import automation as auto
from pulumi.automation._cmd import CommandResult

from infercrane.stack import translate


def err(cls: type[auto.CommandError], stderr: str, stdout: str = "") -> auto.CommandError:
    return cls(CommandResult(stdout=stdout, stderr=stderr, code=255))


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            err(auto.ConcurrentUpdateError, "error: the stack is currently locked by 1 lock(s)"),
            "stack 'dev' is locked by another update.\n    fix: wait for it to finish; if it crashed, run `pulumi cancel`",
        ),
        (
            err(auto.StackNotFoundError, "error: no stack named 'dev' found"),
            "stack 'dev' does not exist in this backend.\n    fix: run `infercrane deploy --stack dev` to create it",
        ),
        (
            err(
                auto.CommandError,
                "",
                'error: Server-Side Apply field conflict detected.\nconflict with "hpa-controller": .spec.replicas',
            ),
            "pulumi-kubernetes hit a field-manager conflict; nothing was forced.",
        ),
        (
            err(auto.CommandError, 'deployments.apps "x" is forbidden: User "u" cannot patch resource'),
            "the Kubernetes API refused an action (RBAC).",
        ),
        (
            err(auto.CommandError, "error: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE"),
            "the secrets passphrase of stack 'dev' is missing or wrong.\n    fix: export PULUMI_CONFIG_PASSPHRASE",
        ),
        (err(auto.CommandError, "error: something else entirely"), "pulumi failed for stack 'dev':\n"),
    ],
    ids=["locked", "missing-stack", "ssa-conflict", "rbac", "passphrase", "other"],
)
def test_translate_names_what_happened_and_what_to_do(exc: auto.CommandError, expected: str) -> None:
    assert expected in str(translate(exc, "dev"))


def test_rbac_message_keeps_the_apiserver_words() -> None:
    text = str(translate(err(auto.CommandError, 'deployments.apps "x" is forbidden: User "u" cannot patch resource'), "dev"))
    assert "cannot patch resource" in text and "bind deploy/kubernetes/base/provider-rbac.yaml" in text
