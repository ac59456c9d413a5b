"""The engine double (a test double of the engines' interfaces, never an engine) as built for the
node, run as a process here: its start in an engine's stages -- the weights read and hashed, a
compile its cache directory's mark skips the second time, a warm-up -- and, as SGLang, `/v1/models`
answering while `/health` says 503 until its start is done."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from infercrane.project.tools import find_tool

pytestmark = pytest.mark.integration
MODEL = "Qwen/Qwen3-0.6B"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


def start(module: str, port: int, env: dict[str, str], *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(find_tool("engine-double")), "-m", module, *flags, "--host", "127.0.0.1", "--port", str(port)],
        env={"PATH": os.environ.get("PATH", ""), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def until(check: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _ = proc.communicate(timeout=20)
    return out


def test_a_start_reads_its_weights_and_a_second_compile_of_the_model_is_a_cache_hit(tmp_path: Path) -> None:
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / "main"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "model.safetensors").write_bytes(b"w" * 1_000_000)
    cache = tmp_path / "compile-cache"
    cache.mkdir()
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "VLLM_CACHE_ROOT": str(cache),
        "INFERCRANE_DOUBLE_COMPILE_SECONDS": "1",
        "INFERCRANE_DOUBLE_LOAD_SECONDS": "0.2",
    }
    logs = []
    for _ in range(2):
        port = free_port()
        proc = start("vllm.entrypoints.openai.api_server", port, env, "--model", MODEL)
        until(lambda: status(port, "/health") == 200)  # noqa: B023 - called within this iteration
        logs.append(stop(proc))
    assert "stage weights: read 1000002 bytes in " in logs[0], logs[0]
    assert "stage compile: 1.0 s (no cache entry)" in logs[0], logs[0]
    assert f"stage compile: cache hit in {cache} (0.0 s)" in logs[1], logs[1]
    assert "stage warm-up: 0.2 s" in logs[1], logs[1]


def test_as_sglang_it_lists_its_models_while_health_says_503_until_its_start_is_done() -> None:
    port = free_port()
    env = {"INFERCRANE_DOUBLE_COMPILE_SECONDS": "2", "INFERCRANE_DOUBLE_LOAD_SECONDS": "1"}
    proc = start("sglang.launch_server", port, env, "--model-path", MODEL)
    try:
        until(lambda: status(port, "/v1/models") == 200)
        assert status(port, "/health") == 503  # compiling: listening, listing, not healthy
        until(lambda: status(port, "/health") == 200)
    finally:
        out = stop(proc)
    assert "stage compile: 2.0 s (no cache entry)" in out and "warm-up done: /health answers 200" in out, out


def test_a_local_directory_as_its_model_is_read_as_its_weights_and_keys_its_compile_by_their_hash(tmp_path: Path) -> None:
    """As a mounted model image: ``--model /mnt/model/models``; the compile mark follows the weights'
    bytes (found under SGLang's TORCHINDUCTOR_CACHE_DIR too), so other weights compile again."""
    weights = tmp_path / "models"
    weights.mkdir()
    (weights / "model-00001-of-00001.safetensors").write_bytes(b"m" * 500_000)
    cache = tmp_path / "inductor"
    cache.mkdir()
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
        "INFERCRANE_DOUBLE_COMPILE_SECONDS": "1",
        "INFERCRANE_DOUBLE_LOAD_SECONDS": "0.2",
    }
    logs = []
    for content in (b"m", b"m", b"n"):  # the same weights twice, then other bytes at the same path
        (weights / "model-00001-of-00001.safetensors").write_bytes(content * 500_000)
        port = free_port()
        proc = start("vllm.entrypoints.openai.api_server", port, env, "--model", str(weights))
        until(lambda: status(port, "/health") == 200)  # noqa: B023 - called within this iteration
        logs.append(stop(proc))
    assert f"weights: {weights}" in logs[0] and "stage weights: read 500000 bytes in " in logs[0], logs[0]
    assert "stage compile: 1.0 s (no cache entry)" in logs[0], logs[0]
    assert f"stage compile: cache hit in {cache} (0.0 s)" in logs[1], logs[1]
    assert "stage compile: 1.0 s (no cache entry)" in logs[2], logs[2]
