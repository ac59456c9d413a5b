"""What the program changes of the SDK's habits: the stack traces it records (no engine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pulumi.runtime import resource as sdk_resource

from infercrane.shell import sdk


@pytest.fixture
def sdk_as_shipped() -> Iterator[None]:
    original = sdk_resource._get_stack_trace
    yield
    sdk_resource._get_stack_trace = original


def test_a_registration_takes_no_stack_trace_and_so_no_source_position(sdk_as_shipped: None) -> None:
    sdk.record_no_stack_traces()
    trace = sdk_resource._get_stack_trace()
    assert list(trace.frames) == []
    assert sdk_resource._get_source_position(trace) is None
