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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

from infercrane import config as cfg
from infercrane.errors import InferCraneError
from infercrane.manifests import render_checked, to_yaml

if TYPE_CHECKING:
    from infercrane.operations import ReplicaAction
    from infercrane.progress import ProgressView

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

    d = with_stack(sub.add_parser("doctor", help="read-only checks of the target cluster"))
    d.add_argument("--kubernetes", action="store_true", required=True, help="check the Kubernetes target")
    d.add_argument("--json", action="store_true")

    def with_intent(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument("model", nargs="?", help="model id: plan/deploy as if this replica intent were in the stack")
        sp.add_argument("--name", help="endpoint / served model name (with MODEL)")
        sp.add_argument("--cloud", default="kubernetes", help="must be kubernetes")
        sp.add_argument("--gpu", help="GPU product-label value, e.g. NVIDIA-L40S (with MODEL)")
        sp.add_argument("--gpu-count", type=int, help="GPUs per replica")
        sp.add_argument("--revision", help="pinned model revision")
        sp.add_argument("--engine", choices=["vllm", "sglang"])
        sp.add_argument("--key", help="durable replica key (default: <name>-r0)")
        sp.add_argument("--json", action="store_true")
        sp.add_argument("--verbose", action="store_true", help="also print Pulumi's full log (always kept in .infercrane/logs/)")
        return sp

    pl = with_intent(
        with_stack(sub.add_parser("plan", help="validate + preflight + pulumi preview; exit 3 when changes are pending"))
    )
    pl.add_argument(
        "--full-preview",
        action="store_true",
        help="always run pulumi preview (by default a no-op proven by the state and a live dry run skips it)",
    )
    dep = with_intent(with_stack(sub.add_parser("deploy", help="validate + preflight + pulumi up, safe to retry")))
    dep.add_argument("--idempotency-key", help="retry-safe key; generated and printed when omitted")
    i = with_stack(sub.add_parser("inspect", help="evidence per replica from the cluster"))
    i.add_argument("--json", action="store_true")
    de = with_stack(
        sub.add_parser("destroy", help="delete exactly this stack's objects, clear its state, prove zero owned objects remain")
    )
    de.add_argument("--json", action="store_true")
    de.add_argument("--verbose", action="store_true", help="also print Pulumi's full log (always kept in .infercrane/logs/)")
    tk = with_stack(sub.add_parser("takeover", help="bring the original adapter's objects under this stack (no restart)"))
    tk.add_argument("--dry-run", action="store_true", help="check every object, change nothing")
    tk.add_argument("--json", action="store_true")
    pr = sub.add_parser("promote", help="copy release bundles from one stack to the next")
    pr.add_argument("--from", dest="source", required=True, help="source stack (must be healthy)")
    pr.add_argument("--to", dest="target", required=True, help="target stack (its file is edited, comments kept)")
    pr.add_argument("--replica", action="append", help="replica key to promote (repeatable; default: all)")
    pr.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
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
        from infercrane.local.plane import ADMIN_CONTEXT, CONTEXT, VIEWER_CONTEXT
        from infercrane.stack import engine_env

        print(f"# contexts in {plane.kubeconfig}:")
        print(f"#   {CONTEXT}: the deploying identity, bound to exactly the shipped Roles (stacks use it)")
        print(f"#   {VIEWER_CONTEXT} (current-context, for your kubectl): read-only pods and nodes")
        print(f"#   {ADMIN_CONTEXT}: cluster admin (bootstrap, out-of-band edits)")
        env = engine_env("local", cfg.project_root())
        env["KUBECONFIG"] = str(plane.kubeconfig)
        for k, v in env.items():
            if k == "PULUMI_CONFIG_PASSPHRASE":
                print("# stack local's passphrase protects no secret; other stacks need your own")
            print(f"export {k}={shlex.quote(v)}")
    return EXIT_OK


def _intent(args: argparse.Namespace) -> dict[str, object] | None:
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
            raise _Usage(
                f"{', '.join(given)} describe a replica intent and need MODEL (e.g. `{args.command} Qwen/Qwen3-8B --name … --gpu …`)"
            )
        return None
    missing = [f for f in ("name", "gpu") if not getattr(args, f)]
    if missing:
        raise _Usage(f"with MODEL, --{' and --'.join(missing)} {'is' if len(missing) == 1 else 'are'} required")
    if args.cloud != "kubernetes":
        raise _Usage(f"--cloud {args.cloud!r}: this provider deploys to 'kubernetes' only")
    replica: dict[str, object] = {"key": args.key or f"{args.name}-r0", "model": args.model, "name": args.name, "gpu": args.gpu}
    if args.gpu_count is not None:  # 0 or 17 is refused by validation, like the same value in a file
        replica["gpuCount"] = args.gpu_count
    if args.revision:
        replica["modelRevision"] = args.revision
    if args.engine:
        replica["engine"] = args.engine
    return replica


class _Usage(Exception):
    pass


@contextmanager
def _progress(args: argparse.Namespace, op: str, total: int, children: int = 1) -> Iterator[ProgressView]:
    """The progress view of one long command (infercrane.progress): a live line on a terminal,
    plain lines otherwise, JSON events with --json; Pulumi's full log in a file named here, or
    also on stderr with --verbose."""
    from infercrane.progress import ProgressView, log_path

    mode = "json" if args.json else ("live" if sys.stderr.isatty() else "lines")
    path = log_path(cfg.project_root(), args.stack, op)
    with path.open("w", encoding="utf-8") as log:
        if not args.json:
            print(f"pulumi log: {cfg.display_path(path)}", file=sys.stderr, flush=True)
        view = ProgressView(op, total, stream=sys.stderr, mode=mode, children_per_replica=children, log=log, echo=args.verbose)
        outcome = "failed"
        try:
            yield view
            outcome = "done"
        finally:
            view.close(outcome)


def _actions_table(actions: list[ReplicaAction], words: dict[str, str]) -> None:
    for a in actions:
        key = a.key or "(removed from config)"
        print(f"  {words[a.action]:<11} {a.slot:<24} key {key}  gpu {a.gpu}  image {a.image}  {', '.join(a.objects)}")


def cmd_plan(args: argparse.Namespace) -> int:
    from infercrane import operations
    from infercrane.stack import Engine

    replica = _intent(args)
    with operations.project_with_intent(args.stack, replica) as project_dir:
        config = cfg.load_stack(args.stack, project_dir=project_dir)
        with _progress(args, "plan", len(config.replicas), len(config.kubernetes.object_kinds)) as view:
            result = operations.plan(
                Engine(args.stack, project_dir=project_dir),
                config,
                on_output=view.on_output,
                on_event=view.on_event,
                full=args.full_preview,
            )
            view.checked(len(config.replicas))
    actions = result.actions
    pending = any(a.action != "same" for a in actions)
    if args.json:
        doc = {
            "stack": args.stack,
            "changesPending": pending,
            "basis": result.basis,
            "whyPreview": result.why_preview,
            "replicas": [a.__dict__ for a in actions],
        }
        print(json.dumps(doc, indent=2))
    else:
        print(f"plan for stack {args.stack}:")
        _actions_table(actions, operations.PLAN_WORDS)
        if result.basis == "state+live":
            print("no changes (proven by the stack's state and a live dry run; --full-preview runs pulumi preview)")
        else:
            print("changes pending" if pending else "no changes")
    return EXIT_CHANGES_PENDING if pending else EXIT_OK


def cmd_deploy(args: argparse.Namespace) -> int:
    from infercrane import operations
    from infercrane.stack import Engine
    from infercrane.stackfile import upsert_replica

    replica = _intent(args)
    path = cfg.stack_file(args.stack)
    before: str | None = None
    if replica is not None:
        cfg.read_stack_values(path)  # missing or malformed: one clear error, nothing written
        before = path.read_text(encoding="utf-8")
        change = upsert_replica(path, replica, cfg.check_stack_file(path))  # invalid: file untouched
        print(f"stack file {cfg.display_path(path)}: replica {replica['key']} {change}", file=sys.stderr)
    try:
        config = cfg.load_stack(args.stack)
        key = args.idempotency_key or operations.new_idempotency_key()
        if not args.idempotency_key:
            print(f"idempotency key: {key} (pass --idempotency-key {key} to retry safely)", file=sys.stderr)
        with _progress(args, "deploy", len(config.replicas), len(config.kubernetes.object_kinds)) as view:
            result = operations.deploy(Engine(args.stack), config, key, on_output=view.on_output, on_event=view.on_event)
    except InferCraneError as exc:
        # Anything raised before `pulumi up` started, or a refusal by the program's own checks
        # inside it, applied nothing: the stack file is put back as it was.
        if before is not None and getattr(exc, "applied_nothing", True):
            path.write_text(before, encoding="utf-8")
            print(f"stack file {cfg.display_path(path)} restored: the intent was not applied", file=sys.stderr)
        elif before is not None:
            print(
                f"note: the intent stays in {cfg.display_path(path)}: the update started and may have applied part of it; "
                "deploy again (same --idempotency-key) to converge",
                file=sys.stderr,
            )
        raise
    if args.json:
        print(
            json.dumps(
                {
                    "stack": args.stack,
                    "idempotencyKey": key,
                    "status": result.status,
                    "intent": result.intent,
                    "recordedAt": result.recorded_at,
                    "replicas": [a.__dict__ for a in result.actions],
                },
                indent=2,
            )
        )
    elif result.status == "replayed":
        print(f"deploy {key}: already applied at {result.recorded_at} with the same intent; nothing changed")
    else:
        print(f"deploy {key}: succeeded at {result.recorded_at}")
        _actions_table(result.actions, operations.DONE_WORDS)
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    from infercrane import cluster
    from infercrane.inspect import inspect, render_text

    config = cfg.load_stack(args.stack)
    records = inspect(config, cluster.client(config.kubernetes), stack=args.stack)
    if args.json:
        print(json.dumps({"stack": args.stack, "replicas": records}, indent=2))
    else:
        print(render_text(records))
    return EXIT_OK


def cmd_destroy(args: argparse.Namespace) -> int:
    from infercrane import cluster, teardown
    from infercrane.stack import Engine

    config = cfg.load_stack(args.stack)
    with _progress(args, "destroy", 0) as view:
        result = teardown.destroy(
            Engine(args.stack),
            config,
            cluster.client(config.kubernetes),
            on_output=view.on_output,
            on_deleted=view.deleted,
            on_remaining=view.remaining,
        )
    left, refused = result.remaining, result.refused
    if args.json:
        print(
            json.dumps(
                {
                    "stack": args.stack,
                    "deleted": result.deleted,
                    "orphansDeleted": result.orphans,
                    "refused": refused,
                    "remaining": left,
                },
                indent=2,
            )
        )
    else:
        if result.orphans:
            print(f"deleted {len(result.orphans)} owned object(s) missing from the state: {', '.join(result.orphans)}")
        for r in refused:
            print(f"refused: {r}; left untouched and dropped from the stack's state")
        if left:
            print(f"destroy finished but {len(left)} owned object(s) remain: {', '.join(left)}")
        else:
            print(f"destroy: zero objects owned by stack {args.stack} remain in namespace {config.kubernetes.namespace}")
    return EXIT_FAILED if left or refused else EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from infercrane import doctor

    config = cfg.load_stack(args.stack)
    checks = doctor.run(config)
    failed = [c for c in checks if c.status == doctor.FAIL]
    if args.json:
        print(json.dumps({"stack": args.stack, "ok": not failed, "checks": doctor.as_json(checks)}, indent=2))
    else:
        for c in checks:
            print(f"  [{c.status}] {c.name}: {c.detail}" + (f"\n         hint: {c.hint}" if c.hint else ""))
        print(
            f"doctor: {len(checks) - len(failed)}/{len(checks)} checks passed or warned"
            + ("" if not failed else f"; {len(failed)} failed")
        )
    return EXIT_FAILED if failed else EXIT_OK


def cmd_promote(args: argparse.Namespace) -> int:
    from infercrane import cluster, promote
    from infercrane.inspect import inspect
    from infercrane.stack import Engine

    source = cfg.load_stack(args.source)
    target = cfg.load_stack(args.target)
    changes = promote.diff(source, target, args.replica)
    print(promote.render_diff(changes, args.source, args.target))
    if not changes or args.dry_run:
        return EXIT_OK
    updates = [h for h in Engine(args.source).history() if h.kind == "update"]
    if not updates or updates[0].result != "succeeded":
        state = f"its last update {updates[0].result}" if updates else "it was never deployed"
        raise promote.PromotionRefused(
            f"stack {args.source!r} is not healthy: {state}; nothing was written.\n"
            f"    fix: make `infercrane deploy --stack {args.source}` succeed first"
        )
    records = inspect(source, cluster.client(source.kubernetes), stack=args.source, read_nodes=False)
    not_ready = [r for r in records if r["state"] != "ready" and (args.replica is None or r["key"] in args.replica)]
    if not_ready:
        listed = ", ".join(f"{r['key']} ({r['state']})" for r in not_ready)
        raise promote.PromotionRefused(
            f"stack {args.source!r} has replicas that are not ready: {listed}; nothing was written.\n"
            f"    fix: check `infercrane inspect --stack {args.source}`; promote only what runs"
        )
    promote.apply(cfg.stack_file(args.target), source, target, args.replica)
    print(f"wrote {cfg.display_path(cfg.stack_file(args.target))}; deploy it with `infercrane deploy --stack {args.target}`")
    return EXIT_OK


def cmd_takeover(args: argparse.Namespace) -> int:
    from infercrane import cluster, takeover

    config = cfg.load_stack(args.stack)
    result = takeover.takeover(config, cluster.client(config.kubernetes), args.stack, dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"stack": args.stack, "dryRun": args.dry_run, **result.__dict__}, indent=2))
        return EXIT_OK
    verb = "would take over" if args.dry_run else "took over"
    print(f"{verb} {len(result.taken)} object(s) for stack {args.stack}: {', '.join(result.taken) or 'none'}")
    if result.already:
        print(f"already this stack's: {', '.join(result.already)}")
    if result.missing:
        print(f"not in the cluster (deploy creates them): {', '.join(result.missing)}")
    if result.taken and not args.dry_run:
        print(f"next: `infercrane deploy --stack {args.stack}` applies to them (pods roll only where the template differs)")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from infercrane import demo

    return demo.run(args.stack)


COMMANDS: Final = {
    "validate": cmd_validate,
    "render": cmd_render,
    "local": cmd_local,
    "demo": cmd_demo,
    "doctor": cmd_doctor,
    "plan": cmd_plan,
    "deploy": cmd_deploy,
    "inspect": cmd_inspect,
    "destroy": cmd_destroy,
    "promote": cmd_promote,
    "takeover": cmd_takeover,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except InferCraneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except _Usage as exc:
        print(f"infercrane {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entrypoint() -> None:
    """Console-script entry point (``infercrane``)."""
    sys.exit(main(sys.argv[1:]))
