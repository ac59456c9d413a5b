"""What a JSON store keeps of a value: Pulumi's protobuf Struct values (mocks, stack outputs) carry
every number as a float, and a whole one comes back as an int."""

from __future__ import annotations

from typing import Any


def as_a_store_keeps_it(value: Any) -> Any:
    """``value`` with every whole float as an int, recursively."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: as_a_store_keeps_it(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_a_store_keeps_it(v) for v in value]
    return value
