"""A Python language host for plain ``pulumi preview|up|destroy`` in this repository.

The real host (Go module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is
refused by the Go module proxy this project builds from. This stand-in serves the Python SDK's own
``LanguageServer`` -- the language runtime the Automation API uses for inline programs -- and
runs the project's ``__main__.py`` in process. The engine, the provider plugin, the SDK and the
program are the real ones; what this host lacks is dependency installation and plugin discovery
from requirements (the Kubernetes provider is found on PATH, built by tools/build.sh). It also
runs Python policy packs (``pulumi preview --policy-pack policy``): see :class:`Host`.
"""

from __future__ import annotations

import os
import queue
import runpy
import signal
import subprocess
import sys
import threading
from concurrent import futures

import grpc
from pulumi.automation._server import LanguageServer
from pulumi.runtime.proto import language_pb2_grpc

MAX_MESSAGE = 400 * 1024 * 1024


def program() -> None:
    project_dir = os.getcwd()
    if project_dir not in sys.path:
        sys.path.insert(0, project_dir)
    runpy.run_path(os.path.join(project_dir, "__main__.py"), run_name="__main__")


class Host(LanguageServer):
    """The SDK's language server, plus ``RunPlugin`` for plugins written in Python -- policy packs:
    the engine runs a directory with a ``PulumiPolicy.yaml`` through its runtime's host. Like the
    real host: ``python -u <plugin dir> ARGS`` with the interpreter of the plugin's ``virtualenv``
    option (relative to the plugin directory), its output streamed back, then its exit code."""

    def RunPlugin(self, request, context):  # noqa: N802 - the gRPC method name
        from google.protobuf import json_format
        from pulumi.runtime.proto import language_pb2

        info = request.info
        plugin_dir = info.program_directory or info.root_directory
        options = json_format.MessageToDict(info.options) if info.HasField("options") else {}
        venv = options.get("virtualenv")
        python = os.path.join(plugin_dir, venv, "bin", "python") if venv else sys.executable
        env = dict(e.split("=", 1) for e in request.env) if request.env else dict(os.environ)
        proc = subprocess.Popen(
            [python, "-u", plugin_dir, *request.args],
            cwd=request.pwd or plugin_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        context.add_callback(proc.kill)  # the engine cancels the call when it is done with the plugin
        lines: queue.Queue[tuple[str, bytes] | None] = queue.Queue()

        def pump(stream, field):
            for line in iter(stream.readline, b""):
                lines.put((field, line))
            lines.put(None)

        for stream, field in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            threading.Thread(target=pump, args=(stream, field), daemon=True).start()
        open_streams = 2
        while open_streams:
            item = lines.get()
            if item is None:
                open_streams -= 1
                continue
            yield language_pb2.RunPluginResponse(**{item[0]: item[1]})
        yield language_pb2.RunPluginResponse(exitcode=proc.wait())


def main() -> None:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(Host(program), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)  # the engine reads the port from the first line of stdout
    # The engine ends its plugins with SIGINT when it is done: stop quietly.
    signal.signal(signal.SIGINT, lambda *_: server.stop(0))
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
