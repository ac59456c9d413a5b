"""What plain ``pulumi`` reads for itself (infercrane.shell.plain): the stack's tags fail closed --
a backend that cannot say them refuses the run, never reads as "no rejection". The Pulumi CLI is a
double here (named so): a recorded answer per call."""

from __future__ import annotations

import subprocess

import pytest

from infercrane.core.errors import InferCraneError
from infercrane.shell import plain


def answering(code: int, stdout: str, stderr: str = "") -> object:
    def cli(stack: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(["pulumi", *args], code, stdout, stderr)

    return cli


def test_the_tags_a_backend_answers_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plain, "_pulumi", answering(0, '{"infercrane:judging:qwen": "rel-b since t"}'))
    assert plain.own_tags("prod") == {"infercrane:judging:qwen": "rel-b since t"}


def test_tags_that_cannot_be_read_refuse_the_run_saying_why_and_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plain, "_pulumi", answering(255, "", "error: failed to load checkpoint: connection refused"))
    with pytest.raises(InferCraneError) as caught:
        plain.own_tags("prod")
    assert str(caught.value).startswith(
        "could not read the tags of stack 'prod', where its canaries' verdicts are kept; nothing was applied: "
        "error: failed to load checkpoint: connection refused"
    )
    assert (
        caught.value.fix
        == "run `infercrane deploy --stack prod`, or check the stack's backend (`pulumi stack tag ls --stack prod`)"
    )
