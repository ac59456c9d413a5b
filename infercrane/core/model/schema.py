"""What every model of the configuration shares: the frozen, strict, camelCase base and the
Kubernetes name rules its fields are checked by. Pure core.
"""

from __future__ import annotations

import re
from typing import Final

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

DNS_LABEL_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


SECRET_KEY_RE: Final = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


QUALIFIED_NAME_RE: Final = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


ARTIFACT_KEY_RE: Final = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")  # model@<40-hex commit>: a model cache entry
DNS_SUBDOMAIN_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class Frozen(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True, str_strip_whitespace=False
    )


def dns_label(value: str) -> str:
    if not DNS_LABEL_RE.match(value):
        raise ValueError(f"{value!r} is not a DNS label")
    return value
