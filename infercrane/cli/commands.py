"""The commands: each reads its inputs, calls the layers, and prints what :mod:`~infercrane.cli.output`
formats from the typed result. Exit codes: 0 ok; 1 failure (bad config, refused, cluster error);
2 usage error; 3 changes pending (``plan``). The Pulumi engine and the cluster are imported per
command (a ``validate`` never loads them). CLI layer.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Final

from infercrane.cli import markdown, output
from infercrane.cli.exits import EXIT_CHANGES_PENDING, EXIT_FAILED, EXIT_OK
from infercrane.cli.local import cmd_demo, cmd_local
from infercrane.cli.notices import disclose, event, progress
from infercrane.cli.parser import replica_intent
from infercrane.core.errors import ConfigError, InferCraneError, UsageError
from infercrane.core.events import Event, Note
from infercrane.core.render.manifests import render_checked, to_yaml
from infercrane.project import paths, stackfile

if TYPE_CHECKING:
    from infercrane.core.model import config as cfg


def cmd_validate(args: argparse.Namespace) -> int:
    disclose(args, args.stack)
    try:
        config = stackfile.load_stack(args.stack)
        rendered = render_checked(config, args.stack)
    except InferCraneError as exc:
        if args.json:
            problems = [p.render() for p in exc.problems] if isinstance(exc, ConfigError) else [str(exc)]
            print(output.validate_failed(args.stack, problems))
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(output.validate_ok(args.stack, config, rendered, as_doc=args.json))
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    disclose(args, args.stack)
    try:
        config = stackfile.load_stack(args.stack)
        rendered = render_checked(config, args.stack)
    except InferCraneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    manifests = [m for r in rendered for m in r.manifests]
    if args.out is None:
        sys.stdout.write(to_yaml(manifests))
        return EXIT_OK
    if args.out.exists() and not args.out.is_dir():
        print(f"error: --out {args.out} is a file; render writes one file per object into a directory", file=sys.stderr)
        print("    fix: pass a directory (it is created when missing), or leave --out out to print the YAML", file=sys.stderr)
        return EXIT_FAILED
    args.out.mkdir(parents=True, exist_ok=True)
    for m in manifests:
        path = args.out / f"{m['metadata']['name']}-{m['kind'].lower()}.yaml"
        path.write_text(to_yaml([m]), encoding="utf-8")
        print(path)
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    from infercrane.engine import planning
    from infercrane.engine.workspace import Engine

    packs = [_policy_pack(p) for p in args.policy_pack]
    if args.markdown and args.json:
        raise UsageError("--markdown and --json each print the whole plan; give one of them")
    if args.read_only and args.full_preview:
        raise UsageError("--read-only plans without a dry run, so it takes no --full-preview; drop one of them")
    replica = replica_intent(args)
    # With MODEL, the program plans the stack's config plus that intent, handed to it directly:
    # the stack file is never touched, and its kubeconfig path and state resolve as for any plan.
    config = stackfile.load_stack(args.stack) if replica is None else stackfile.load_stack_with(args.stack, replica)
    disclose(args, args.stack, acting=config)
    notes: list[str] = []
    with progress(args, "plan", len(config.replicas), len(config.kubernetes.object_kinds)) as view:

        def sink(ev: Event) -> None:
            if isinstance(ev, Note):
                notes.append(ev.text)
            view(ev)

        try:
            result = planning.plan(
                Engine(args.stack, sink=view),
                config,
                on_output=view.on_output,
                sink=sink,
                full=args.full_preview,
                policy_packs=packs,
                read_only=args.read_only,
            )
        except InferCraneError as exc:
            if args.markdown:  # the comment says it too: a refusal is what a reviewer must see first
                print(markdown.refusal_markdown(args.stack, exc))
            raise
        view.checked(len(config.replicas))
    if args.markdown:
        print(markdown.plan_markdown(args.stack, result, {r.key: r.name for r in config.replicas}, notes))
    else:
        print(output.plan(args.stack, result, as_doc=args.json))
    return EXIT_CHANGES_PENDING if result.changes_pending else EXIT_OK


def _policy_pack(path: str) -> str:
    """``--policy-pack DIR`` as an absolute path, refused unless DIR holds a PulumiPolicy.yaml."""
    from pathlib import Path

    pack = Path(path).resolve()
    if not (pack / "PulumiPolicy.yaml").is_file():
        raise UsageError(f"--policy-pack {path}: no PulumiPolicy.yaml in {pack}; name a policy pack directory (e.g. policy)")
    return str(pack)


def cmd_deploy(args: argparse.Namespace) -> int:
    from infercrane.engine import idempotency, operations
    from infercrane.engine.workspace import Engine
    from infercrane.project.stackfile import upsert_replica

    replica = replica_intent(args)
    path = paths.stack_file(args.stack)
    before: str | None = None
    if replica is not None:
        stackfile.read_stack_values(path)  # missing or malformed: one clear error, nothing written
        before = path.read_text(encoding="utf-8")
        change = upsert_replica(path, replica, stackfile.check_stack_file(path))  # invalid: file untouched
        shown = paths.display_path(path)
        event(
            args.json,
            {"event": "stack-file", "path": shown, "replica": replica["key"], "change": change},
            f"stack file {shown}: replica {replica['key']} {change}",
        )
    try:
        config = stackfile.load_stack(args.stack)
        disclose(args, args.stack, acting=config)
        key = args.idempotency_key or idempotency.new_idempotency_key()
        if not args.idempotency_key:
            event(
                args.json,
                {"event": "idempotency-key", "key": key},
                f"idempotency key: {key} (pass --idempotency-key {key} to retry safely)",
            )
        with progress(args, "deploy", len(config.replicas), len(config.kubernetes.object_kinds)) as view:
            result = operations.deploy(
                Engine(args.stack, sink=view),
                config,
                key,
                on_output=view.on_output,
                sink=view,
                retry_rejected=args.retry_rejected,
            )
    except InferCraneError as exc:
        # Anything raised before `pulumi up` started, or a refusal by the program's own checks
        # inside it, applied nothing: the stack file is put back as it was.
        shown = paths.display_path(path)
        if before is not None and exc.applied_nothing:
            stackfile.write_atomically(path, before)
            event(
                args.json,
                {"event": "stack-file", "path": shown, "change": "restored"},
                f"stack file {shown} restored: the intent was not applied",
            )
        elif before is not None:
            event(
                args.json,
                {"event": "stack-file", "path": shown, "change": "kept"},
                f"note: the intent stays in {shown}: the update started and may have applied part of it; "
                "deploy again (same --idempotency-key) to converge",
            )
        raise
    print(output.deploy(args.stack, result, as_doc=args.json))
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    from infercrane.live.client.api import Live
    from infercrane.live.inspect import inspect_report

    config = stackfile.load_stack(args.stack)
    disclose(args, args.stack)
    records, endpoints = inspect_report(config, Live.connect(config.kubernetes), stack=args.stack)
    if any(rec["pods"] is None for rec in records):  # no pod to show a start of: the last one a deploy recorded
        from infercrane.engine.rejections import recorded_starts

        for rec, start in zip(records, recorded_starts(args.stack, [r["key"] for r in records]), strict=True):
            rec["recordedStart"] = start
    print(output.inspect(args.stack, records, endpoints, canary_verdicts(args.stack, config), as_doc=args.json))
    return EXIT_OK


def canary_verdicts(stack: str, config: cfg.InferCraneConfig) -> dict[str, str]:
    """Each endpoint under a canary policy: its canary's last verdict, read from the stack's backend
    (its outputs and tags) -- or why it could not be read; nothing is read for a stack without one."""
    from infercrane.engine.rejections import last_verdicts
    from infercrane.engine.workspace import Engine

    endpoints = sorted({r.name for r in config.replicas if config.rollout_for(r.name).canary is not None})
    if not endpoints:
        return {}
    try:
        found = last_verdicts(Engine(stack), endpoints)
    except InferCraneError as exc:
        return dict.fromkeys(endpoints, f"not read from the stack's backend: {exc.message}")
    return {e: found.get(e, "none yet") for e in endpoints}


def cmd_destroy(args: argparse.Namespace) -> int:
    from infercrane.engine import teardown
    from infercrane.engine.workspace import Engine
    from infercrane.live.client.api import Live

    config = stackfile.load_stack(args.stack)
    disclose(args, args.stack, acting=config)
    with progress(args, "destroy", 0) as view:
        result = teardown.destroy(
            Engine(args.stack, sink=view), config, Live.connect(config.kubernetes), on_output=view.on_output, sink=view
        )
    print(output.destroy(args.stack, config.kubernetes.namespace, result, as_doc=args.json))
    return EXIT_FAILED if result.remaining or result.refused else EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from infercrane.live import doctor

    config = stackfile.load_stack(args.stack)
    disclose(args, args.stack)
    checks = doctor.run(config, read_only=args.read_only)
    failed = sum(c.status == doctor.FAIL for c in checks)
    print(output.doctor(args.stack, checks, failed, as_doc=args.json))
    return EXIT_FAILED if failed else EXIT_OK


def cmd_promote(args: argparse.Namespace) -> int:
    from infercrane.core import promotion as promote
    from infercrane.engine import promotion as gate

    disclose(args, args.source, args.target)
    source = stackfile.load_stack(args.source)
    target = stackfile.load_stack(args.target)
    changes = promote.diff(source, target, args.replica)
    print(output.promotion_diff(changes, args.source, args.target))
    if not changes or args.dry_run:
        return EXIT_OK
    gate.check_healthy(args.source, source, args.replica)
    stackfile.write_bundles(paths.stack_file(args.target), source, target, args.replica)
    print(f"wrote {paths.display_path(paths.stack_file(args.target))}; deploy it with `infercrane deploy --stack {args.target}`")
    return EXIT_OK


def cmd_takeover(args: argparse.Namespace) -> int:
    from infercrane.live import takeover
    from infercrane.live.client.api import Live

    config = stackfile.load_stack(args.stack)
    disclose(args, args.stack, acting=config)
    result = takeover.takeover(config, Live.connect(config.kubernetes), args.stack, dry_run=args.dry_run)
    print(output.takeover(args.stack, result, dry_run=args.dry_run, as_doc=args.json))
    return EXIT_OK


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
