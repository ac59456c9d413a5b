"""InferCrane for Kubernetes: per-replica stack configs to guarded LLM inference workloads.

Importing this package creates nothing: no Pulumi resource, no cluster connection.
"""

from __future__ import annotations

__version__ = "0.1.0"
