"""``infercrane local`` (start, stop, status, env, reset of the embedded control plane) and
``infercrane demo`` (the main job on it). CLI layer.
"""

from __future__ import annotations

import argparse
import os

from infercrane.cli import output
from infercrane.cli.exits import EXIT_FAILED, EXIT_OK
from infercrane.project import paths


def cmd_local(args: argparse.Namespace) -> int:
    from infercrane.local.plane import Plane

    plane = Plane.default()
    if args.local_command == "start":
        if args.nodes is not None:
            from infercrane.local.bootstrap import read_nodes

            read_nodes(args.nodes)  # a wrong file is said before anything starts
        plane.start(
            nodes_file=args.nodes,
            pod_ready_delay=args.pod_ready_delay,
            kubernetes_version=args.kubernetes_version,
            real_node=args.real_node,
            pod_grace=args.pod_grace,
            real_nodes=args.real_nodes,
        )
    elif args.local_command == "stop":
        plane.stop()
    elif args.local_command == "reset":
        plane.reset()
        print(f"removed {plane.state}")
        if not os.environ.get("PULUMI_BACKEND_URL"):  # the project's own file backend: the local stacks' state
            from infercrane.engine.workspace import Engine
            from infercrane.project.paths import LOCAL_STACKS

            # Their state describes objects of the plane just removed: a deploy would trust it.
            forgotten = [s for s in LOCAL_STACKS if Engine(s).forget_state()]
            if forgotten:
                print(f"removed the state of stack(s) {', '.join(forgotten)} (their objects were on that plane)")
    elif args.local_command == "status":
        st = plane.status()
        print(output.local_status(st, as_doc=args.json))
        return EXIT_OK if st["running"] else EXIT_FAILED
    elif args.local_command == "env":
        from infercrane.engine.environment import engine_env

        env = engine_env("local", paths.project_root()) | {"KUBECONFIG": str(plane.kubeconfig)}
        print(output.local_env(str(plane.kubeconfig), env))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from infercrane.cli import demo

    return demo.run(args.stack)
