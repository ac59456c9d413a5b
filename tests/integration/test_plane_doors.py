"""The local plane opens no door: its etcd answers only the API server's certificate, its real
node's kubelet answers each identity by the plane's RBAC (SubjectAccessReview), and nothing of it
listens beyond loopback but that kubelet, on its bridge address. Tried as a local user or an
identity of the plane would: with and without certificates, on the plane's own ports."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lightkube import Client

from infercrane.local import node_files
from infercrane.local.plane import Plane
from tests.integration.conftest import Project
from tests.integration.test_cli_ops import cli
from tests.integration.test_real_node import double, on_node, pods_of

pytestmark = pytest.mark.integration
NS = "infercrane-system"


def _status(url: str, ca: Path, cert: tuple[Path, Path] | None, method: str = "GET", body: bytes | None = None) -> int | str:
    """The HTTP status ``url`` answers with, or why no answer came (a refused handshake)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method=method), context=ctx, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ssl.SSLError, ConnectionError) as exc:
        return f"refused: {getattr(exc, 'reason', exc)}"


def _identity(plane: Plane, stem: str) -> tuple[Path, Path]:
    return plane.pki_dir / f"{stem}.crt", plane.pki_dir / f"{stem}.key"


def test_etcd_answers_the_api_servers_certificate_and_refuses_every_other_client(plane: Plane) -> None:
    port = json.loads((plane.state / "plane.json").read_text())["ports"]["etcd"]
    url, etcd = f"https://127.0.0.1:{port}/v3/kv/range", plane.pki_dir / "etcd"
    every_secret = json.dumps({"key": "L3JlZ2lzdHJ5L3NlY3JldHMv", "range_end": "L3JlZ2lzdHJ5L3NlY3JldHMw"}).encode()
    assert (
        _status(url, etcd / "ca.crt", (etcd / "apiserver-client.crt", etcd / "apiserver-client.key"), "POST", every_secret) == 200
    )
    for who in (None, _identity(plane, "deployer"), _identity(plane, "admin")):  # the plane's CA: not etcd's
        answer = _status(url, etcd / "ca.crt", who, "POST", every_secret)
        assert isinstance(answer, str) and answer.startswith("refused"), (who, answer)
    plain = _status(f"http://127.0.0.1:{port}/v3/kv/range", etcd / "ca.crt", None, "POST", every_secret)
    assert plain != 200, plain


def test_the_kubelet_refuses_the_deploying_identity_its_pods_logs_and_exec_and_serves_the_admin(
    project: Project, admin: Client, plane: Plane
) -> None:
    project.stack("itdoors", [on_node("it-doors")], imageDigest=double())
    assert cli(project, "deploy", "--stack", "itdoors").returncode == 0
    (pod,) = pods_of(admin, "it-doors")
    name, container = pod.metadata.name, pod.spec.containers[0].name
    port = json.loads((plane.state / "plane.json").read_text())["ports"]["kubelet"]
    base, ca = f"https://{node_files.NODE_IP}:{port}", plane.pki_dir / "ca.crt"
    doors = {
        "pods": ("GET", "/pods"),
        "logs": ("GET", f"/containerLogs/{NS}/{name}/{container}"),
        "exec": ("POST", f"/exec/{NS}/{name}/{container}?command=env&output=1"),
    }
    for who in ("deployer", "viewer"):
        answers = {d: _status(base + path, ca, _identity(plane, who), method) for d, (method, path) in doors.items()}
        assert answers == {"pods": 403, "logs": 403, "exec": 403}, (who, answers)
    assert _status(base + "/pods", ca, None) == 401  # no certificate, no token: nobody
    admin_answers = {d: _status(base + path, ca, _identity(plane, "admin"), method) for d, (method, path) in doors.items()}
    assert admin_answers["pods"] == 200 and admin_answers["logs"] == 200, admin_answers
    assert admin_answers["exec"] not in (401, 403), admin_answers  # allowed; a plain POST is then no stream upgrade
    # The API server's own kubelet client keeps its rights: logs through the API, as `kubectl logs`.
    assert "a test double, not an engine" in next(iter(admin.log(name, namespace=NS)))
    assert cli(project, "destroy", "--stack", "itdoors").returncode == 0


def _listening() -> dict[int, tuple[str, int]]:
    """socket inode -> (address, port) of every TCP socket listening in this network namespace."""
    out: dict[int, tuple[str, int]] = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            raw, port = fields[1].split(":")
            packed = bytes.fromhex(raw)
            if family == socket.AF_INET:
                address = socket.inet_ntop(family, packed[::-1])
            else:
                address = socket.inet_ntop(family, b"".join(packed[i : i + 4][::-1] for i in range(0, 16, 4)))
            out[int(fields[9])] = (address, int(port, 16))
    return out


def _sockets_of(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def test_nothing_of_the_plane_listens_beyond_loopback_but_each_kubelet_on_its_bridge_address(plane: Plane) -> None:
    record = json.loads((plane.state / "plane.json").read_text())
    listening = _listening()
    wide: dict[str, list[tuple[str, int]]] = {}
    seen = 0
    for name, proc in record["processes"].items():
        mine = [listening[i] for i in _sockets_of(int(proc["pid"])) if i in listening]
        seen += len(mine)
        beyond = [(a, p) for a, p in mine if a not in ("127.0.0.1", "::1")]
        if beyond:
            wide[name] = beyond
    assert seen >= 5, f"only {seen} listening sockets found: the check would see nothing"
    nodes = [n for n in node_files.NODES if n.name in (record.get("realNodes") or [])]
    allowed = {n.components[1]: [(n.ip, int(record["ports"][n.ports[0]]))] for n in nodes}  # each kubelet on its bridge
    assert wide == allowed, wide


def test_a_plane_started_beside_a_running_one_goes_without_the_real_node_and_says_whose_it_is(
    plane: Plane, admin: Client, tmp_path: Path
) -> None:
    from lightkube.resources.core_v1 import Node

    said: list[str] = []
    second = Plane(tmp_path / "second-plane")
    try:
        status = second.start(progress=said.append)
    finally:
        second.stop(quiet=True)
    if json.loads((plane.state / "plane.json").read_text()).get("realNode"):
        assert status["realNode"] is None, status
        assert any(f"the real node of the plane at {plane.state} runs" in line for line in said), said
        n = admin.get(Node, node_files.NAME)  # the first plane's node kept its kubelet, bridge and pods
        assert any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions if n.status else None) or [])
    assert not (second.state / "host.json").exists()  # it changed nothing of the host
