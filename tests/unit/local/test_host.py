"""The host as found: the kernel tunables the real node's kubelet needs are recorded before the
plane sets them and put back when the node stops; the kubelet's links to its pods' logs go with
the node, and their directory too when the node made it. On a stand-in for /proc/sys."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane.core.errors import PlaneError
from infercrane.local import host

DISTRIBUTION = {
    "vm.overcommit_memory": "0",
    "vm.panic_on_oom": "0",
    "kernel.panic": "0",
    "kernel.panic_on_oops": "0",
    "kernel.keys.root_maxkeys": "200",
    "kernel.keys.root_maxbytes": "20000",
    "net.ipv4.ip_forward": "0",
}


@pytest.fixture
def proc_sys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proc-sys"
    for name, value in DISTRIBUTION.items():
        f = root / name.replace(".", "/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(value + "\n")
    monkeypatch.setattr(host, "PROC_SYS", root)
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(host, "RECORD", tmp_path / "run" / "infercrane-host.json")  # the machine's record
    return root


def test_the_kubelets_tunables_hold_while_the_node_runs_and_the_host_is_as_found_after(proc_sys: Path, tmp_path: Path) -> None:
    state, links, logs = tmp_path / "plane", tmp_path / "var-log-containers", tmp_path / "plane" / "node" / "pod-logs"
    state.mkdir()
    before = host.settings()
    host.take_over(state, links)
    assert {k: host.read(k) for k in host.KUBELET_TUNABLES} == host.KUBELET_TUNABLES
    assert host.read("kernel.panic") == "10" and host.read("net.ipv4.ip_forward") == "0"
    links.mkdir()  # the kubelet makes it, and links each container's log into it
    (links / "p_infercrane-system_engine-1.log").symlink_to(logs / "infercrane-system_p_1" / "engine" / "0.log")
    (links / "someone-elses.log").symlink_to(tmp_path / "elsewhere.log")
    assert f"link {links / 'p_infercrane-system_engine-1.log'}" in host.changed(state, logs, links)
    put_back = host.give_back(state, logs, links)
    assert "kernel.panic=0" in put_back and "kernel.panic_on_oops=0" in put_back and "vm.overcommit_memory=0" in put_back
    assert host.settings() == before
    assert sorted(p.name for p in links.iterdir()) == ["someone-elses.log"]  # another's link stays, and so its directory
    assert host.changed(state, logs, links) == []


def test_a_start_after_a_killed_plane_keeps_the_host_as_first_found_and_the_directory_the_node_made_goes(
    proc_sys: Path, tmp_path: Path
) -> None:
    state, links = tmp_path / "plane", tmp_path / "var-log-containers"
    state.mkdir()
    host.take_over(state, links)
    links.mkdir()
    host.take_over(state, links)  # killed, started again: the kubelet's values are not what was found
    assert host.give_back(state, tmp_path / "logs", links)[-1] == f"removed the directory {links}"
    assert host.read("kernel.panic") == "0" and not links.exists() and not host.RECORD.exists()


def test_left_changed_the_host_is_named_setting_by_setting(proc_sys: Path, tmp_path: Path) -> None:
    state = tmp_path / "plane"
    state.mkdir()
    host.take_over(state, tmp_path / "links")
    left = host.changed(state, tmp_path / "logs", tmp_path / "links")
    assert "kernel.panic is 10, was 0" in left and "kernel.panic_on_oops is 1, was 0" in left


def test_a_host_whose_settings_cannot_be_written_refuses_the_node_and_changes_nothing(
    proc_sys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "plane"
    state.mkdir()
    (proc_sys / "kernel" / "panic_on_oops").chmod(0o444)
    real = Path.write_text

    def read_only(self: Path, text: str, *a: object, **k: object) -> int:
        if self.name == "panic_on_oops" and text == "1":
            raise PermissionError(13, "Read-only file system")
        return real(self, text)

    monkeypatch.setattr(Path, "write_text", read_only)
    with pytest.raises(PlaneError) as err:
        host.take_over(state, tmp_path / "links")
    assert "needs kernel setting kernel.panic_on_oops=1, which cannot be written: Read-only file system." in err.value.message
    assert "--no-real-node" in (err.value.fix or "")
    assert host.settings() == DISTRIBUTION and not host.RECORD.exists()


def test_a_plane_killed_and_its_state_removed_leaves_the_host_as_found_for_the_next_plane_to_restore(
    proc_sys: Path, tmp_path: Path
) -> None:
    """Issue #66: the record lived in the plane's state; with it removed after a crash, the next
    plane recorded the kubelet's values as "the host as found" and never restored the real ones."""
    first, second, links = tmp_path / "plane-a", tmp_path / "plane-b", tmp_path / "links"
    first.mkdir()
    second.mkdir()
    host.take_over(first, links)  # the first plane's node runs, then it is killed and its state removed
    import shutil

    shutil.rmtree(first)
    host.take_over(second, links)
    assert host.read("kernel.panic_on_oops") == "1"
    host.give_back(second, tmp_path / "logs", links)
    assert host.settings() == DISTRIBUTION, "the values the first plane found, not the kubelet's"


def test_a_record_an_older_plane_kept_in_its_state_is_moved_to_the_machines(proc_sys: Path, tmp_path: Path) -> None:
    state = tmp_path / "plane"
    state.mkdir()
    (state / host.LEGACY_RECORD).write_text('{"settings": {"kernel.panic": "0"}, "linksDirMade": false}')
    (proc_sys / "kernel" / "panic").write_text("10\n")
    assert host.give_back(state, tmp_path / "logs", tmp_path / "links") == ["kernel.panic=0"]
    assert not (state / host.LEGACY_RECORD).exists() and not host.RECORD.exists()
