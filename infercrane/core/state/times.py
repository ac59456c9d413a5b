"""Timestamps as the Kubernetes API and Pulumi write them (RFC 3339). Pure core."""

from __future__ import annotations

from datetime import datetime


def parse(value: object) -> datetime | None:
    """The moment ``value`` names, or None when it is empty or not a timestamp."""
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
