"""The control plane's copy of the worker key, which serving evidence and the canary send to the
pods: from a file (:data:`KEY_FILE_ENV`, the file the Secret was made from, as the seed's bootstrap
does) or the value itself (:data:`KEY_ENV`, withheld from every child process). Never logged,
never in a message, an output or the state. Live-cluster layer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Final

from infercrane.core import naming

KEY_FILE_ENV: Final = f"{naming.WORKER_KEY_ENV}_FILE"
KEY_ENV: Final = naming.WORKER_KEY_ENV  # the pods' variable too: one name for the key
_withheld: str | None = None  # the key taken out of this process's environment (withhold_key)


def withhold_key(environ: MutableMapping[str, str] = os.environ) -> None:
    """Take :data:`KEY_ENV` out of this process's environment and keep it here, so that no child --
    pulumi, its language host and provider, a policy pack (a team's code), a plane process --
    inherits the key. The file variable (:data:`KEY_FILE_ENV`, the recommended form) names a path
    only, and stays. The CLI does this first (:func:`infercrane.cli.main.main`)."""
    global _withheld
    value = environ.pop(KEY_ENV, None)
    if value is not None:
        _withheld = value


def worker_key(env: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """The control plane's copy of the worker key, or None and why there is none (never the key)."""
    if env is None:
        env = {**os.environ, KEY_ENV: _withheld} if _withheld is not None and KEY_ENV not in os.environ else os.environ
    path = env.get(KEY_FILE_ENV)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                key = f.read().strip()
        except OSError as exc:
            return None, f"{KEY_FILE_ENV} cannot be read ({exc.strerror or exc.__class__.__name__})"
        return (key, "") if key else (None, f"the file {KEY_FILE_ENV} names is empty")
    key = (env.get(KEY_ENV) or "").strip()
    return (key, "") if key else (None, f"no worker key for the check ({KEY_FILE_ENV} or {KEY_ENV} is not set)")
