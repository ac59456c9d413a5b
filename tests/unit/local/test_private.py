"""Every private file of the local plane -- each key, each kubeconfig, the worker key -- is mode
0600 from its first byte: the mode is checked at the first write into the file, under a umask that
would leave a plainly created file world-readable."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from infercrane.local import access, addons, bootstrap, launch, pki, private
from infercrane.local.plane import Plane

ModeAtFirstWrite = dict[str, int]


@pytest.fixture
def first_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModeAtFirstWrite]:
    """The permission bits of each file at the moment of the first write into it."""
    seen: ModeAtFirstWrite = {}
    write = os.write

    def observed(fd: int, data: bytes) -> int:
        name = os.readlink(f"/proc/self/fd/{fd}")
        seen.setdefault(name, stat.S_IMODE(os.fstat(fd).st_mode))
        return write(fd, data)

    monkeypatch.setattr(private.os, "write", observed)
    old = os.umask(0)
    try:
        yield seen
    finally:
        os.umask(old)


def _private(path: Path, seen: ModeAtFirstWrite) -> None:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    at_first = [mode for name, mode in seen.items() if Path(name).name.startswith(f".{path.name}.")]
    assert at_first == [0o600], (path.name, seen)


def test_the_cas_key_and_every_issued_key_are_private_from_their_first_byte(
    tmp_path: Path, first_writes: ModeAtFirstWrite
) -> None:
    ca = pki.CA.load_or_create(tmp_path / "pki")
    issued = ca.issue("deployer", "someone")
    sa_key, _ = pki.service_account_keys(tmp_path / "pki")
    for key in (tmp_path / "pki" / "ca.key", issued.key, sa_key):
        _private(key, first_writes)
    assert stat.S_IMODE((tmp_path / "pki").stat().st_mode) == 0o700
    assert stat.S_IMODE(issued.cert.stat().st_mode) == 0o666  # a certificate is public (umask 0 here)


def test_each_kubeconfig_of_the_plane_is_private_from_its_first_byte(tmp_path: Path, first_writes: ModeAtFirstWrite) -> None:
    plane = Plane(tmp_path / "plane")
    plane.state.mkdir()
    access.write_pki(plane.pki_dir)
    access.write_kubeconfigs(plane.state, plane.pki_dir, 6443)
    written = sorted(plane.state.glob("*kubeconfig"))
    assert {p.name for p in written} >= {"kubeconfig", "admin.kubeconfig", "scheduler.kubeconfig", "kserve-manager.kubeconfig"}
    for path in written:
        _private(path, first_writes)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda state: bootstrap.worker_key_file(state), id="worker-key"),
        pytest.param(
            lambda state: (
                addons.webhook_certs(launch.Launch(state, state / "pki", state / "logs", {}, state / "stages.yaml")) / "tls.key"
            ),
            id="kserve-webhook-key",
        ),
    ],
)
def test_the_worker_key_and_the_webhooks_key_are_private_from_their_first_byte(
    tmp_path: Path, first_writes: ModeAtFirstWrite, make: Callable[[Path], Path]
) -> None:
    ca = pki.CA.load_or_create(tmp_path / "pki")
    ca.issue("kserve-webhook", "kserve-webhook-server", server=True)
    _private(make(tmp_path), first_writes)


def test_a_failed_private_write_leaves_neither_a_partial_file_nor_its_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ca.key"
    target.write_bytes(b"the old key")

    def full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(private.os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        private.write(target, b"a new key")
    assert target.read_bytes() == b"the old key" and sorted(p.name for p in tmp_path.iterdir()) == ["ca.key"]
