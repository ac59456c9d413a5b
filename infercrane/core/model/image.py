"""The immutable image reference rule: ``repo@sha256:<64 lowercase hex>``, nothing else.

Tags drift; placeholders ship by accident. Both are refused with the reason. Pure core.
"""

from __future__ import annotations

import re
from typing import Final

MAX_LENGTH: Final = 512
# The seed's rule, extended to accept a registry port (``host:5000/repo``), which the seed refuses.
DIGEST_RE: Final = re.compile(
    r"^[a-zA-Z0-9][a-zA-Z0-9._-]*(?::[0-9]+)?(?:/[a-zA-Z0-9._-]+)*(?::[a-zA-Z0-9._-]+)?@sha256:[a-f0-9]{64}$"
)
EXAMPLE: Final = "vllm/vllm-openai@sha256:<64 lowercase hex>"


def digest_problem(value: str) -> str | None:
    """Why ``value`` is not an immutable digest reference, or None when it is.

    Surrounding whitespace is a problem too: the value is used verbatim, never trimmed silently.
    """
    if value != value.strip():
        return f"image {value!r} has surrounding whitespace"
    if not value:
        return "image is empty"
    if len(value) > MAX_LENGTH:
        return f"image is {len(value)} characters long (at most {MAX_LENGTH})"
    if "REPLACE_WITH" in value:
        return f"image {value!r} is a placeholder"
    if "@sha256:" not in value:
        return f"image {value!r} is not pinned by digest (a tag can change under you)"
    hex_part = value.rsplit("@sha256:", 1)[1]
    if re.fullmatch(r"[a-fA-F0-9]+", hex_part) and hex_part != hex_part.lower():
        return f"image {value!r} has an uppercase digest (sha256 digests are lowercase hex)"
    if not re.fullmatch(r"[a-f0-9]{64}", hex_part):
        return f"image {value!r} digest is not 64 lowercase hex characters (got {len(hex_part)})"
    if not DIGEST_RE.match(value):
        return f"image {value!r} is not a valid repository reference"
    return None


#: A model image: weights as an OCI image (KServe's modelcar layout: the files under ``/models``).
MODEL_SCHEME: Final = "oci://"
MODEL_EXAMPLE: Final = "oci://registry.example/models/qwen3-8b@sha256:<64 lowercase hex>"


def model_image_problem(value: str) -> str | None:
    """Why ``value`` is not a model image pinned by digest (``oci://repo@sha256:<64 hex>``), or None."""
    if not value.startswith(MODEL_SCHEME):
        return f"model image {value!r} is not an {MODEL_SCHEME} reference (e.g. {MODEL_EXAMPLE})"
    problem = digest_problem(value[len(MODEL_SCHEME) :])
    return None if problem is None else "model " + problem.replace(repr(value[len(MODEL_SCHEME) :]), repr(value))


def model_reference(value: str) -> str:
    """The image reference of a model image (``oci://`` dropped), as a pod's image volume names it."""
    return value[len(MODEL_SCHEME) :]


def digest_of(reference: str) -> str:
    """``sha256:<hex>`` of a digest reference."""
    return "sha256:" + reference.rsplit("@sha256:", 1)[1]
