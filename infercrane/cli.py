"""The ``infercrane`` command line: ``main(argv) -> exit code``.

Exit codes: 0 ok; 1 failure (bad config, refused, cluster error); 2 usage error;
3 changes pending (``plan``). User mistakes print one clear message and no traceback.
Operations layer: imports the pure core freely; the Pulumi engine and cluster only per command.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Final

from infercrane import config as cfg
from infercrane.errors import InferCraneError
from infercrane.manifests import render_checked, to_yaml

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_CHANGES_PENDING: Final = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infercrane", description="LLM inference workloads on Kubernetes, applied with server-side apply.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def with_stack(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument("--stack", default="local", help="stack name: stacks/Pulumi.<NAME>.yaml (default: local)")
        return sp

    v = with_stack(sub.add_parser("validate", help="validate config and guards; nothing live"))
    v.add_argument("--json", action="store_true", help="machine-readable result")
    r = with_stack(sub.add_parser("render", help="print the exact manifests the program would apply"))
    r.add_argument("--out", type=Path, help="write one YAML file per object into this directory")

    loc = sub.add_parser("local", help="the embedded local control plane")
    lsub = loc.add_subparsers(dest="local_command", required=True, parser_class=_Parser)
    ls = lsub.add_parser("start", help="start (or reuse) the plane and bootstrap it")
    ls.add_argument("--nodes", type=Path, help="simulated nodes file (default: infercrane/local/nodes.yaml)")
    lsub.add_parser("stop", help="stop the plane's own processes (state is kept)")
    lst = lsub.add_parser("status", help="is it running; where is the kubeconfig")
    lst.add_argument("--json", action="store_true")
    lsub.add_parser("env", help="print shell exports (KUBECONFIG, PATH, Pulumi settings) for the plane")
    lsub.add_parser("reset", help="stop and delete all plane state")

    with_stack(sub.add_parser("demo", help="the main job: local plane, pulumi preview + up, evidence"))
    return p


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        config = cfg.load_stack(args.stack)
        rendered = render_checked(config, args.stack)
    except InferCraneError as exc:
        if args.json:
            problems = [p.render() for p in getattr(exc, "problems", [])] or [str(exc)]
            print(json.dumps({"ok": False, "stack": args.stack, "problems": problems}, indent=2))
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps({"ok": True, "stack": args.stack, "replicas": [r.replica.key for r in rendered]}, indent=2))
    else:
        n = sum(len(r.manifests) for r in rendered)
        print(
            f"stack {args.stack}: valid ({len(rendered)} replica(s), {n} object(s), workload API {config.kubernetes.workload_api})"
        )
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    try:
        config = cfg.load_stack(args.stack)
        rendered = render_checked(config, args.stack)
    except InferCraneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    manifests = [m for r in rendered for m in r.manifests]
    if args.out is None:
        sys.stdout.write(to_yaml(manifests))
        return EXIT_OK
    args.out.mkdir(parents=True, exist_ok=True)
    for m in manifests:
        path = args.out / f"{m['metadata']['name']}-{m['kind'].lower()}.yaml"
        path.write_text(to_yaml([m]), encoding="utf-8")
        print(path)
    return EXIT_OK


def cmd_local(args: argparse.Namespace) -> int:
    from infercrane.local.plane import Plane

    plane = Plane.default()
    if args.local_command == "start":
        plane.start(nodes_file=args.nodes)
    elif args.local_command == "stop":
        plane.stop()
    elif args.local_command == "reset":
        plane.reset()
        print(f"removed {plane.state}")
    elif args.local_command == "status":
        st = plane.status()
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            state = "running" if st["running"] else "not running"
            print(f"local plane {state}; kubeconfig {st['kubeconfig']} (contexts {st['context']}, {st['adminContext']})")
            for name, up in st["processes"].items():
                print(f"  {name}: {'up' if up else 'down'}")
        return EXIT_OK if st["running"] else EXIT_FAILED
    elif args.local_command == "env":
        from infercrane.stack import engine_env

        env = engine_env("local", cfg.project_root())
        env["KUBECONFIG"] = str(plane.kubeconfig)
        for k, v in env.items():
            if k != "PULUMI_CONFIG_PASSPHRASE":
                print(f"export {k}={shlex.quote(v)}")
        print("# stack local's passphrase protects no secret; other stacks need your own")
        print(f"export PULUMI_CONFIG_PASSPHRASE={shlex.quote(env.get('PULUMI_CONFIG_PASSPHRASE', ''))}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from infercrane import demo

    return demo.run(args.stack)


COMMANDS: Final = {"validate": cmd_validate, "render": cmd_render, "local": cmd_local, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except InferCraneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entrypoint() -> None:
    """Console-script entry point (``infercrane``)."""
    sys.exit(main(sys.argv[1:]))
