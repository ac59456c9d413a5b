"""Files only the plane's owner may read: private keys, kubeconfigs, the worker key. Each is
created with mode 0600 from its first byte (``os.open`` with the mode, never a chmod after the
write: between the two another local user could read a CA key) and put in place by a rename, so a
reader sees the whole old file or the whole new one. Local-plane layer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

MODE: Final = 0o600
DIR_MODE: Final = 0o700


def write(path: Path, data: bytes | str) -> None:
    """``data`` into ``path``, mode 0600 from creation, replacing ``path`` atomically."""
    body = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, MODE)
    try:
        os.fchmod(fd, MODE)  # the umask could only narrow it; never wider than 0600
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)


def directory(path: Path) -> Path:
    """``path`` as a directory only its owner may enter (made 0700, or narrowed to it)."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    path.chmod(DIR_MODE)
    return path
