"""A Python language host for plain ``pulumi preview|up|destroy`` in this repository.

The real host (Go module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is
refused by the Go module proxy this project builds from. This stand-in serves the Python SDK's own
``LanguageServer`` -- the language runtime the Automation API uses for inline programs -- and
runs the project's ``__main__.py`` in process. The engine, the provider plugin, the SDK and the
program are the real ones; what this host lacks is dependency installation and plugin discovery
from requirements (the Kubernetes provider is found on PATH, built by tools/build.sh).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
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


def main() -> None:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(program), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)  # the engine reads the port from the first line of stdout
    # The engine ends its plugins with SIGINT when it is done: stop quietly.
    signal.signal(signal.SIGINT, lambda *_: server.stop(0))
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
