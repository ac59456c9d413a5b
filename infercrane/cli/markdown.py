"""A plan as a pull request's comment (``plan --markdown``): a table per endpoint, its waves and
canary, and a refusal in the same form, within GitHub's comment limit. CLI layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from infercrane.core.plan.actions import Action

if TYPE_CHECKING:
    from infercrane.core.plan.duration import Estimate
    from infercrane.core.plan.waves import EndpointRollout
    from infercrane.engine.changes import ReplicaAction
    from infercrane.engine.planning import PlanResult
from infercrane.cli.output import actions_table
from infercrane.cli.rollout_text import endpoint_lines, span

COMMENT_LIMIT = 60_000  # characters: GitHub's limit for a comment is 65,536


def plan_markdown(
    stack: str, result: PlanResult, endpoint_of: Mapping[str, str], notes: Sequence[str] = (), *, limit: int = COMMENT_LIMIT
) -> str:
    """The plan as a pull-request comment a person reads in ten seconds: one summary table (per
    endpoint: replicas changing, waves, lowest ready, GPUs, rejections), then a collapsible block
    per endpoint with its replicas and waves in the plan's own words. Never over ``limit``
    characters: beyond it the blocks are summarised (the full plan is ``plan --json``).
    ``endpoint_of``: key -> endpoint name (a key that left the config has none)."""
    by_endpoint: dict[str, list[ReplicaAction]] = {}
    for a in result.actions:
        by_endpoint.setdefault(endpoint_of.get(a.key or "", "(left the config)"), []).append(a)
    rollouts = {e.endpoint: e for e in (result.rollout.endpoints if result.rollout else ())}
    moving = {name: [a for a in acts if a.action is not Action.SAME] for name, acts in by_endpoint.items()}
    pending = sorted(name for name, acts in moving.items() if acts)
    basis = "read-only (get and list, no dry run)" if result.basis == "read-only" else result.basis
    head = [
        f"### InferCrane plan: stack `{stack}`",
        "",
        f"**{sum(len(moving[n]) for n in pending)} replica(s) change in {len(pending)} of {len(by_endpoint)} endpoint(s)**"
        if pending
        else "**No changes.**",
        f"<sub>basis: {basis}</sub>",
        "",
    ]
    if pending:
        head += [
            "| endpoint | replicas changing | waves | lowest ready | GPUs before → after (peak) | canary |",
            "|---|---|---|---|---|---|",
        ]
    rows = []
    for name in pending:
        e = rollouts.get(name)
        counts = ", ".join(f"{n} {w}" for w, n in _counted(a.action.planned for a in moving[name]))
        rows.append(
            f"| `{name}` | {len(moving[name])} of {len(by_endpoint[name])}: {counts} | {len(e.waves) if e else '-'} | "
            f"{f'{e.lowest_ready} of {e.ready_before}' if e else '-'} | "
            f"{f'{e.gpus_before} → {e.gpus_after} ({e.peak_gpus})' if e else '-'} | "
            f"{_canary_cell(e, result.rejected.get(name))} |"
        )
    if pending and result.estimate is not None:
        head += ["", *timeline(result.estimate, set(pending)), ""]
    tail = [f"> {n.removeprefix('note: ')}" for n in notes]
    blocks = []
    for name in pending:
        lines = [*actions_table(moving[name], done=False), *(endpoint_lines(rollouts[name]) if name in rollouts else [])]
        blocks.append(f"<details><summary><code>{name}</code></summary>\n\n```\n" + "\n".join(lines) + "\n```\n</details>\n")
    text = _fit(head, rows, blocks, tail, limit)
    return text


GANTT_ENDPOINTS = 12  # the timeline shows the longest lanes; plan --json has every one


def timeline(estimate: Estimate, pending: set[str]) -> list[str]:
    """The expected rollout as a sentence and a Mermaid gantt block (GitHub renders it): one
    section per changing endpoint -- the longest :data:`GANTT_ENDPOINTS` --, one bar per stage,
    seconds from the lanes' start."""
    lanes = sorted((lane for lane in estimate.lanes if lane.endpoint in pending), key=lambda lane: -lane.seconds)
    said = (
        f"**Expected: about {span(estimate.seconds)}**, {estimate.gpu_hours:.2f} GPU-hours beyond steady state "
        f"<sub>(starts from: {'; '.join(estimate.bases) or 'none restart'})</sub>"
    )
    if not any(lane.stages for lane in lanes):
        return [said]
    chart = ["```mermaid", "gantt", "  dateFormat X", "  axisFormat %M:%S"]
    for lane in lanes[:GANTT_ENDPOINTS]:
        chart.append(f"  section {_label(lane.endpoint)}")
        chart += [f"  {_label(s.label)} : {round(s.begins)}, {round(s.begins + max(s.seconds, 1))}" for s in lane.stages]
    chart.append("```")
    if len(lanes) > GANTT_ENDPOINTS:
        chart.append(f"<sub>the {GANTT_ENDPOINTS} longest of {len(lanes)} lanes</sub>")
    return [said, "", *chart]


def _label(text: str) -> str:
    """Text Mermaid's gantt syntax takes as a name (no ``:``, ``;`` or ``#``)."""
    return " ".join(text.replace(":", " ").replace(";", " ").replace("#", " ").split())


def refusal_markdown(stack: str, exc: Exception) -> str:
    """A plan that was refused, as the pull request's comment says it: the refusal, whole."""
    text = str(exc)
    if len(text) > COMMENT_LIMIT - 400:
        text = text[: COMMENT_LIMIT - 400] + "\n… (cut: the whole refusal is in the job's log)"
    return f"### InferCrane plan: stack `{stack}`\n\n**Refused: nothing would be applied.**\n\n```\n{text}\n```\n"


def _counted(words: Any) -> list[tuple[str, int]]:
    out: dict[str, int] = {}
    for w in words:
        out[w] = out.get(w, 0) + 1
    return sorted(out.items())


def _canary_cell(e: EndpointRollout | None, rejected: str | None) -> str:
    if rejected:
        return f"rejected before ({rejected.split(',')[0]})"
    if e is None or e.canary_policy is None:
        return "-"
    if e.canary:
        return f"`{', '.join(e.canary)}` bakes {e.canary_policy.bake_seconds} s"
    return e.canary_unneeded or e.no_canary or "-"


def _fit(head: list[str], rows: list[str], blocks: list[str], tail: list[str], limit: int) -> str:
    """As much as fits in ``limit`` characters, in that order of importance: the head, the notes,
    the table's rows, then the blocks; what is cut is counted and pointed to ``plan --json``."""
    budget = limit - 400  # room for the line saying what was cut
    text = "\n".join(head)
    fixed = "\n" + "\n".join(tail) if tail else ""
    kept_rows = []
    for r in rows:
        if len(text) + len(fixed) + len(r) + 1 > budget:
            break
        kept_rows.append(r)
        text += "\n" + r
    kept_blocks = 0
    body = ""
    for b in blocks[: len(kept_rows)]:
        if len(text) + len(fixed) + len(body) + len(b) + 2 > budget:
            break
        body += "\n" + b
        kept_blocks += 1
    cut = []
    if len(kept_rows) < len(rows):
        cut.append(f"{len(rows) - len(kept_rows)} more endpoint(s) change")
    if kept_blocks < len(blocks):
        cut.append(f"the details of {len(blocks) - kept_blocks} endpoint(s) are left out")
    said = f"\n\n_{'; '.join(cut)}: the whole plan is `infercrane plan --json` (the job's artifact)._" if cut else ""
    return text + "\n" + body + fixed + said
