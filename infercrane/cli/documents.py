"""What ``--json`` prints: a command's typed result as plain JSON data -- dataclasses by field,
keys in camelCase, a config's policies in their stack-file form. CLI layer.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def as_json(value: Any) -> Any:
    """A result as plain JSON data: dataclasses by field (camelCase keys), recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):  # a policy of the config: its stack-file form
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, Mapping):
        return {str(k): as_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [as_json(v) for v in value]
    return value


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(as_json(doc), indent=2)
