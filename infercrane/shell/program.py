"""The Pulumi program: read config once, validate, guard, preflight, build, export.

``__main__.py`` calls :func:`main`; the Automation API (``infercrane.engine.workspace``) runs the
same steps as :func:`run`, which yields to the SDK's event loop between registrations -- one
program, never an inline copy. Every user mistake becomes a ``pulumi.RunError`` with the full
message and no traceback; no object is registered before all checks pass (a run that starts
beside the caller's preflight registers its provider first -- a Pulumi resource, no cluster
write -- and waits: :mod:`infercrane.shell.gate`). The checks are the stack context's
(:class:`~infercrane.live.stack.context.StackContext`), the ones every ``infercrane`` command
runs; under Pulumi mocks only the render. Pulumi shell.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import config as runtime_config

from infercrane.core import naming
from infercrane.core.errors import InferCraneError, NotReady, ReadOnlyUpdate
from infercrane.core.load import loading
from infercrane.core.model import config as cfg
from infercrane.core.plan.actions import Action
from infercrane.core.render import RenderedReplica
from infercrane.core.render.manifests import render_checked
from infercrane.core.state.urns import legacy_names, legacy_slots
from infercrane.core.stops import DeletionsRefused, RolledBack, RolloutStopped
from infercrane.live.stack.context import StackContext
from infercrane.shell import sdk
from infercrane.shell.awaiting import Taken, Waits, await_readiness, running_under_mocks
from infercrane.shell.channel import READ_ONLY_ENV, Channel
from infercrane.shell.components import Ahead, ReplicaComponent
from infercrane.shell.outputs import export, summary_of
from infercrane.shell.plain import judged, own_state, refuse_beyond_policy
from infercrane.shell.progress import evidence_note
from infercrane.shell.provider import make_provider


def stack_values() -> dict[str, Any]:
    """Every ``infercrane:*`` and ``kubernetes:*`` stack config value, parsed (the one place config is read)."""
    import json

    # The SDK keeps the stack's config in one map (set by the language host, the Automation API or
    # mocks), with PULUMI_CONFIG as the fallback; Pulumi has no public call that lists keys.
    merged = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    values: dict[str, Any] = {}
    for key, raw in merged.items():
        if key.startswith(("infercrane:", "kubernetes:")):
            try:
                values[key] = json.loads(raw)
            except (TypeError, ValueError):
                values[key] = raw
    return values


def build(config: cfg.InferCraneConfig, stack: str, *, preflight: bool, channel: Channel | None = None) -> list[ReplicaComponent]:
    """Every check (:func:`check`), then one component per replica."""
    checked = check(config, stack, preflight=preflight, channel=channel or Channel())
    return [checked.component(r) for r in checked.rendered]


@dataclass(frozen=True)
class Checked:
    """What passed every check of a run, ready to register: the config (caches verified), each
    replica rendered (config order), the slot names of components still named by slot, the
    provider, the stack's context (None under Pulumi mocks: nothing live was checked), and the
    keys the rollout recreates (:attr:`~infercrane.core.plan.waves.Rollout.recreated`)."""

    config: cfg.InferCraneConfig
    rendered: list[RenderedReplica]
    legacy: Mapping[str, str]
    provider: k8s.Provider
    context: StackContext | None = None
    recreated: frozenset[str] = frozenset()

    def component(self, r: RenderedReplica) -> ReplicaComponent:
        key = r.replica.key
        return ReplicaComponent(
            r.name,
            r.manifests,
            summary_of(r, self.config),
            self.provider,
            legacy=self.legacy.get(key),
            recreate=key in self.recreated,
        )


def check(
    config: cfg.InferCraneConfig, stack: str, *, preflight: bool, channel: Channel, provider: k8s.Provider | None = None
) -> Checked:
    """Every check of a run, before anything is registered, through the stack's context (the
    caller's, or under plain ``pulumi`` its own): the caches verified, the render and the
    preflight -- or what the caller prepared for this run -- then, under plain ``pulumi``, the
    rollout policy. ``preflight`` False (Pulumi mocks): the render only."""
    read_only = channel.read_only or os.environ.get(READ_ONLY_ENV) == "1"
    if read_only and not pulumi.runtime.is_dry_run():
        raise ReadOnlyUpdate(stack)
    prepared = channel.prepared
    if not preflight:
        rendered = list(prepared.rendered) if prepared is not None else render_checked(config, stack)
        slots = dict(zip([r.replica.key for r in rendered], legacy_slots(rendered), strict=True))  # no state to read
        legacy = channel.legacy if channel.legacy is not None else slots
        return Checked(config, rendered, legacy, provider or make_provider(config.kubernetes))
    ctx = channel.context or StackContext.connect(stack, config)
    if prepared is None:  # plain `pulumi`, or a caller whose caches were refused: the one order, refusing at once
        ctx, prepared = ctx.prepare(lambda warning: pulumi.log.warn(f"preflight: {warning}"), read_only=read_only)
    rendered = list(prepared.rendered)
    # The caller's preflight refused (None): the program's own refuses again, inside the update.
    report = prepared.report if prepared.report is not None else ctx.preflight(rendered, read_only=read_only)
    assert report is not None  # not deferred: a refusal raises
    for warning in report.warnings:  # podSecurityWarnings: report
        pulumi.log.warn(f"preflight: {warning}")
    for unchecked in report.unchecked:  # read-only: what only a dry run says (a warning: shown by every preview)
        pulumi.log.warn(f"preflight: {unchecked}")
    drift = [ref for ref in report.drift if report.actions[ref] is Action.UPDATE]
    if drift and pulumi.runtime.is_dry_run():
        pulumi.log.info(
            f"preflight: applying would change {len(drift)} live object(s): {', '.join(drift[:5])}"
            + (" …" if len(drift) > 5 else "")
        )
    state = own_state(stack) if channel.legacy is None else {}  # plain `pulumi`: no caller hands it over
    plan = channel.rollout
    if not channel.driven:
        plan = ctx.rollout(rendered, report, state)
        assert plan is not None  # planned from a report
        if channel.legacy is None:  # plain `pulumi`: the canary marks read here (a caller applied them already)
            plan = judged(stack, plan, lambda unproven, started: ctx.rollout(rendered, report, state, unproven, started))
        refuse_beyond_policy(stack, plan)
    legacy = channel.legacy if channel.legacy is not None else legacy_names(state)  # the real slots
    recreated = plan.recreated if plan is not None and channel.rollback is None else frozenset()
    return Checked(ctx.config, rendered, legacy, provider or make_provider(ctx.config.kubernetes), ctx, recreated)


def main(channel: Channel | None = None) -> None:
    """The program, as ``__main__.py`` runs it (plain ``pulumi``): :func:`run`'s steps, at once."""
    channel = channel or Channel()
    sdk.record_no_stack_traces()
    checked = _checked(channel)
    components = [checked.component(r) for r in checked.rendered]
    _end(channel, checked, components, await_readiness(components, checked.config, channel, checked.context))


async def run(channel: Channel) -> None:
    """The program, as the Automation API runs it (:mod:`infercrane.engine.workspace`).

    One path with one ending: every check (:func:`_checked`), the replicas registered -- all at
    once, yielding to the SDK's event loop after each, so each registration leaves for the engine
    while the next is built; or, when the caller drives a rollout, lane by lane
    (:func:`_in_lanes`) -- then the stack's outputs (:func:`_end`). With a ``gate``, the provider
    is registered first and the rest waits for the caller's inputs."""
    sdk.drop_debug_lines()
    sdk.record_no_stack_traces()
    provider = None
    if channel.gate is not None and channel.context is not None:
        provider = make_provider(channel.context.config.kubernetes)  # its plugin starts and is configured meanwhile
        try:
            late = await asyncio.get_running_loop().run_in_executor(None, channel.gate.wait)
        except InferCraneError as exc:
            _fail(channel, exc)
        channel.hand_over(late)
    checked = _checked(channel, provider)
    if channel.rollout is not None and not pulumi.runtime.is_dry_run():
        components, taken, canaries = await _in_lanes(channel, checked)
        _end(channel, checked, components, taken, canaries)
        return
    components = []
    ahead = Ahead()
    for r in checked.rendered:
        components.append(await ahead.register(functools.partial(checked.component, r)))
    _end(channel, checked, components, await_readiness(components, checked.config, channel, checked.context))


def _fail(channel: Channel, exc: InferCraneError) -> NoReturn:
    """End the run with ``exc``: the caller re-raises it typed, the engine shows its words."""
    channel.error = exc
    raise pulumi.RunError(str(exc)) from exc


def _checked(channel: Channel, provider: k8s.Provider | None = None) -> Checked:
    """The config, read once (the caller's, else the stack's), and every check of the run."""
    channel.error = None
    stack = pulumi.get_stack()
    try:
        if channel.context is not None:
            config = channel.context.config
        else:
            config = loading.load(stack_values(), source=f"stacks/Pulumi.{stack}.yaml", env=os.environ)
        return check(config, stack, preflight=not running_under_mocks(), channel=channel, provider=provider)
    except InferCraneError as exc:
        _fail(channel, exc)


def _end(
    channel: Channel,
    checked: Checked,
    components: list[ReplicaComponent],
    taken: pulumi.Output[Taken] | Taken | None,
    canaries: Mapping[str, Any] | None = None,
) -> None:
    """The run's one ending: the stack's outputs for what it registered."""
    export(components, checked.config, channel.deploy_record, taken, canaries)


async def _in_lanes(channel: Channel, checked: Checked) -> tuple[list[ReplicaComponent], Taken, dict[str, Any]]:
    """Each endpoint's lane at its own pace (:mod:`infercrane.shell.lanes`): its components, what
    the waits took (evidence, starts) and the canaries' verdicts. A lane that stops fails the run once the others
    are done -- so Pulumi deletes nothing -- with every stopped endpoint and its reason."""
    from infercrane.shell import lanes

    by_key = {r.replica.key: r for r in checked.rendered}
    order = {key: i for i, key in enumerate(by_key)}
    plan, delete = channel.rollout, channel.delete
    if plan is None or delete is None:  # a caller that drives a rollout hands both over
        raise pulumi.RunError("a rollout was handed over without its deleter; nothing was applied")
    pinned = channel.rollback or {}

    def register(key: str) -> ReplicaComponent:
        if key in pinned:  # a rollback: exactly as the state recorded it before the deploy
            was = pinned[key]
            return ReplicaComponent(
                naming.object_name(key), was.manifests, was.summary, checked.provider, legacy=checked.legacy.get(key)
            )
        return checked.component(by_key[key])

    waits = Waits(checked.config, channel, checked.context)
    try:
        outcome = await lanes.roll(
            plan.lanes,
            {} if channel.rollback is not None else {e.endpoint: e for e in plan.endpoints},  # a rollback says its own steps
            register,
            waits,
            delete,
            evidence_note(channel),
            order,
            max_extra_gpus=plan.max_extra_gpus,
            restarts=plan.restarts,
            lent=plan.lent,
            recreate=channel.recreate if channel.rollback is None else None,
        )
    except RolloutStopped as exc:  # a canary's verdict and the engine's failure together
        _fail(channel, exc)
    finally:
        waits.close()
    if outcome.stopped:
        lost = [c for _, _, c in outcome.stopped if isinstance(c, NotReady) and c.api_lost]
        single = plan.stages <= 1
        if single and all(isinstance(c, NotReady) for _, _, c in outcome.stopped):
            failure: InferCraneError = NotReady(
                [f for _, _, c in outcome.stopped for f in c.failures],  # type: ignore[attr-defined]
                len(checked.rendered),
                api_lost=len(lost) == len(outcome.stopped),
            )
        elif len(lost) == len(outcome.stopped):
            failure = lost[0]  # one cause for all: said once, with how to resume
        else:
            failure = RolloutStopped(outcome.stopped, len(plan.lanes), accepted=outcome.accepted, finished=outcome.finished)
        _fail(channel, failure)
    if channel.rollback is not None:  # done: ended failed on purpose, so Pulumi deletes nothing
        _fail(channel, RolledBack())
    foreign = await asyncio.get_running_loop().run_in_executor(None, channel.recheck) if channel.recheck else []
    if foreign:  # Pulumi deletes by name once the program returns: it must not, and it will not
        _fail(channel, DeletionsRefused(foreign))
    taken = Taken.of(waits, outcome.components, outcome.results, channel)
    return outcome.components, taken, {endpoint: v.as_json() for endpoint, v in outcome.verdicts.items()}
