"""The command line's grammar: subcommands, options, and the replica intent given as arguments.

Usage errors exit 2 with one line (argparse's own, or :class:`UsageError`). CLI layer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from infercrane.core.errors import UsageError
from infercrane.core.model.engines import ENGINES

EXIT_USAGE: Final = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="infercrane", description="LLM inference workloads on Kubernetes, applied with server-side apply.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = _with_stack(sub.add_parser("validate", help="validate config and guards; nothing live"))
    v.add_argument("--json", action="store_true", help="machine-readable result")
    r = _with_stack(sub.add_parser("render", help="print the exact manifests the program would apply"))
    r.add_argument("--out", type=Path, help="write one YAML file per object into this directory")
    _local(sub)
    _with_stack(sub.add_parser("demo", help="the main job: local plane, pulumi preview + up, evidence"))
    d = _with_stack(sub.add_parser("doctor", help="read-only checks of the target cluster"))
    d.add_argument("--kubernetes", action="store_true", required=True, help="check the Kubernetes target")
    d.add_argument(
        "--read-only",
        action="store_true",
        help="check this identity as the read-only plan's: exactly get and list on the replica objects, no write",
    )
    d.add_argument("--json", action="store_true")
    _plan(sub)
    _deploy(sub)
    i = _with_stack(sub.add_parser("inspect", help="evidence per replica from the cluster"))
    i.add_argument("--json", action="store_true")
    de = _with_stack(
        sub.add_parser("destroy", help="delete exactly this stack's objects, clear its state, prove zero owned objects remain")
    )
    de.add_argument("--json", action="store_true")
    de.add_argument("--verbose", action="store_true", help="also print Pulumi's full log (always kept in .infercrane/logs/)")
    tk = _with_stack(sub.add_parser("takeover", help="bring the original adapter's objects under this stack (no restart)"))
    tk.add_argument("--dry-run", action="store_true", help="check every object, change nothing")
    tk.add_argument("--json", action="store_true")
    pr = sub.add_parser("promote", help="copy release bundles from one stack to the next")
    pr.add_argument("--from", dest="source", required=True, help="source stack (must be healthy)")
    pr.add_argument("--to", dest="target", required=True, help="target stack (its file is edited, comments kept)")
    pr.add_argument("--replica", action="append", help="replica key to promote (repeatable; default: all)")
    pr.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    return p


def _with_stack(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sp.add_argument("--stack", default="local", help="stack name: stacks/Pulumi.<NAME>.yaml (default: local)")
    return sp


def _with_intent(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sp.add_argument("model", nargs="?", help="model id: plan/deploy as if this replica intent were in the stack")
    sp.add_argument("--name", help="endpoint / served model name (with MODEL)")
    sp.add_argument("--cloud", default="kubernetes", help="must be kubernetes")
    sp.add_argument("--gpu", help="GPU product-label value, e.g. NVIDIA-L40S (with MODEL)")
    sp.add_argument("--gpu-count", type=int, help="GPUs per replica")
    sp.add_argument("--revision", help="pinned model revision")
    sp.add_argument("--engine", choices=list(ENGINES))
    sp.add_argument("--key", help="durable replica key (default: <name>-r0)")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--verbose", action="store_true", help="also print Pulumi's full log (always kept in .infercrane/logs/)")
    return sp


def _local(sub: Any) -> None:
    loc = sub.add_parser("local", help="the embedded local control plane")
    lsub = loc.add_subparsers(dest="local_command", required=True, parser_class=_Parser)
    ls = lsub.add_parser("start", help="start (or reuse) the plane and bootstrap it")
    ls.add_argument("--nodes", type=Path, help="simulated nodes file (default: infercrane/local/nodes.yaml)")
    ls.add_argument(
        "--pod-ready-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="every pod becomes Ready this long after it starts (simulated model load; default 0; kept until the next start)",
    )
    ls.add_argument(
        "--pod-grace",
        action="store_true",
        help="a deleted pod on the kwok nodes stays, terminating, until its grace period ends "
        "(an engine draining to its last second; default: it goes at once; kept until the next start)",
    )
    ls.add_argument(
        "--kubernetes-version",
        metavar="MINOR",
        help="run this Kubernetes (1.34, 1.35, 1.36, 1.37; default 1.36), built by `tools/build.sh kube@MINOR`",
    )
    ls.add_argument(
        "--real-nodes",
        type=int,
        default=1,
        metavar="N",
        help="run N real nodes (1 or 2; each its own kubelet, containerd and image store; default 1)",
    )
    ls.add_argument(
        "--no-real-node",
        dest="real_node",
        action="store_false",
        help="start without the real node (a kubelet on containerd that runs pods; default: started when the machine can)",
    )
    lsub.add_parser("stop", help="stop the plane's own processes (state is kept)")
    lst = lsub.add_parser("status", help="is it running; where is the kubeconfig")
    lst.add_argument("--json", action="store_true")
    lsub.add_parser("env", help="print shell exports (KUBECONFIG, PATH, Pulumi settings) for the plane")
    lsub.add_parser("reset", help="stop and delete all plane state")


def _plan(sub: Any) -> None:
    pl = _with_intent(
        _with_stack(sub.add_parser("plan", help="validate + preflight + pulumi preview; exit 3 when changes are pending"))
    )
    pl.add_argument(
        "--full-preview",
        action="store_true",
        help="always run pulumi preview (by default a no-op proven by the state and a live dry run skips it)",
    )
    pl.add_argument(
        "--markdown",
        action="store_true",
        help="print the plan as a pull-request comment (a summary table, a block per endpoint; at most 60,000 characters)",
    )
    pl.add_argument(
        "--read-only",
        action="store_true",
        help="plan with get, list and watch only (the viewer Role): no dry run, no engine run, no backend write",
    )
    pl.add_argument(
        "--policy-pack",
        action="append",
        default=[],
        metavar="DIR",
        help="run pulumi preview with this policy pack (repeatable; e.g. policy/, InferCrane's guards as policies)",
    )


def _deploy(sub: Any) -> None:
    dep = _with_intent(_with_stack(sub.add_parser("deploy", help="validate + preflight + pulumi up, safe to retry")))
    dep.add_argument("--idempotency-key", help="retry-safe key; generated and printed when omitted")
    dep.add_argument(
        "--retry-rejected",
        action="store_true",
        help="deploy a release a canary rejected before (refused without it), giving it another canary",
    )


def replica_intent(args: argparse.Namespace) -> dict[str, object] | None:
    """The replica intent given on the command line, or None. Usage errors exit 2."""
    if not args.model:
        given = [
            f"--{f.replace('_', '-')}"
            for f in ("name", "gpu", "gpu_count", "revision", "engine", "key")
            if getattr(args, f) is not None
        ]
        if args.cloud != "kubernetes":
            given.append("--cloud")
        if given:
            raise UsageError(
                f"{', '.join(given)} describe a replica intent and need MODEL (e.g. `{args.command} Qwen/Qwen3-8B --name … --gpu …`)"
            )
        return None
    missing = [f for f in ("name", "gpu") if not getattr(args, f)]
    if missing:
        raise UsageError(f"with MODEL, --{' and --'.join(missing)} {'is' if len(missing) == 1 else 'are'} required")
    if args.cloud != "kubernetes":
        raise UsageError(f"--cloud {args.cloud!r}: this provider deploys to 'kubernetes' only")
    replica: dict[str, object] = {"key": args.key or f"{args.name}-r0", "model": args.model, "name": args.name, "gpu": args.gpu}
    if args.gpu_count is not None:  # 0 or 17 is refused by validation, like the same value in a file
        replica["gpuCount"] = args.gpu_count
    if args.revision:
        replica["modelRevision"] = args.revision
    if args.engine:
        replica["engine"] = args.engine
    return replica
