"""Serving evidence: a replica counts as serving only when its own engine answers ``GET /health``
200 and, asked ``GET /v1/models`` with the worker key, names the models its intent renders
(:func:`~infercrane.core.render.command.served_names`); the evidence says which of the two failed.

The question goes to the replica directly, at the ready addresses of its Service's EndpointSlices
(what a gateway routes by): the API server's service proxy cannot carry the key -- kube-apiserver
deletes the ``Authorization`` header of every request it authenticates. Listing EndpointSlices is
an *optional* read (:mod:`~infercrane.live.evidence.slices`), never the seed's Role.
The key is the control plane's own copy (:mod:`~infercrane.live.evidence.worker_key`), sent only
in that header: never logged, never in a message, an output or the state.

Four answers: ``serving`` (every expected name served), ``not serving`` (it serves other names),
``refused`` (401/403: the replica's key is not the control plane's) and ``not verifiable`` (no
key, no right, no ready address, or an answer that is no engine's), each with its reason and
fix. Live-cluster layer.

The rule of what counts as serving, how an engine is asked and the one checker that asks stay
together, so the rule and its reader cannot drift.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from infercrane.core import naming
from infercrane.core.errors import EVIDENCE_FAILED, with_fix
from infercrane.core.model.config import InferCraneConfig
from infercrane.core.model.replica import Replica
from infercrane.core.render.command import served_names
from infercrane.live.client import failures
from infercrane.live.client.api import Live
from infercrane.live.evidence import mounted, said
from infercrane.live.evidence.asking import Served, engine
from infercrane.live.evidence.slices import Slices
from infercrane.live.evidence.worker_key import KEY_ENV, KEY_FILE_ENV, worker_key
from infercrane.live.status.pods import POD_READER
from infercrane.live.status.verdicts import Verdict

ADDRESS_WAIT_SECONDS: Final = 15.0  # a Deployment's pod is Ready a moment before its slice says so
CHECK_THREADS: Final = 32  # replicas asked at once: 100 whose addresses time out take 4 timeouts, not 17

State = Literal["serving", "not serving", "refused", "not verifiable"]
FAILED: Final[frozenset[str]] = frozenset({"not serving", "refused"})  # evidence against the replica


def counts(state: str, policy: str) -> bool:
    """Whether a ready replica with evidence in ``state`` counts as serving under ``policy``
    (``servingEvidence``): never with evidence against it; without any, only under ``check``.
    The one rule for a deploy's verdict and for routing membership."""
    return state not in FAILED and not (state == "not verifiable" and policy == "require")


@dataclass(frozen=True)
class Evidence:
    """What one replica's engine said it serves, when, and by which route."""

    state: State
    expected: tuple[str, ...]
    served: tuple[str, ...] = ()
    route: str = ""  # "EndpointSlice address 10.88.0.4:8000" (every ready address is asked)
    checked_at: str = ""  # RFC 3339, UTC
    reason: str = ""
    fix: str = ""
    asked: tuple[tuple[str, int], ...] = ()  # the (address, port) pairs asked
    model_image: mounted.Mounted | None = None  # what its pods mounted as its model image, if it has one

    def as_output(self) -> dict[str, Any]:
        """The stack output / ``inspect --json`` form (never the key)."""
        out: dict[str, Any] = {"state": self.state, "expected": list(self.expected), "served": list(self.served)}
        out |= {"route": self.route or None, "checkedAt": self.checked_at or None}
        out |= {"modelImage": self.model_image.as_output()} if self.model_image is not None else {}
        return out | ({"reason": self.reason} if self.reason else {}) | ({"fix": self.fix} if self.fix else {})

    def line(self) -> str:
        """One line for a person: the verdict, what was served, how it was asked."""
        return said.line(self.as_output())

    def verdict(self, policy: str) -> Verdict:
        """A ready replica's verdict once asked: evidence against it fails it; none at all (not
        verifiable) fails it only under ``servingEvidence: require`` (``policy``)."""
        if not counts(self.state, policy):
            why = f"{EVIDENCE_FAILED}{self.state}: {self.reason}" + (f" ({self.route})" if self.route else "")
            return Verdict("failed", with_fix(why, self.fix, indent=6))
        return Verdict("ready")


def service_name(config: InferCraneConfig, replica: Replica) -> str:
    """The Service that routes to the replica's pods: ours, or KServe's predictor Service."""
    return config.kubernetes.api.service.format(name=naming.object_name(replica.key))


class Checker:
    """Asks replicas for their models, with one key and one Live for a whole command; safe to use
    from several threads (each replica is checked as it becomes ready)."""

    def __init__(
        self,
        live: Live,
        config: InferCraneConfig,
        key: str | None,
        why_no_key: str = "",
        *,
        ask: Callable[[str, int, str | None], Served] = engine,
        address_wait: float = ADDRESS_WAIT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._live, self._config, self._key, self._why_no_key = live, config, key, why_no_key
        self._ask, self._address_wait, self._sleep, self._clock = ask, address_wait, sleep, clock
        self._slices = Slices(live, config.kubernetes.namespace, address_wait, sleep, clock)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def from_env(cls, live: Live, config: InferCraneConfig, env: Mapping[str, str] | None = None) -> Checker:
        key, why = worker_key(env)
        return cls(live, config, key, why)

    async def check_soon(self, replica: Replica) -> Evidence:
        """:meth:`check` on the checker's own threads: a fleet whose pod addresses answer nothing
        (each request waits for its timeout) never holds the threads the readiness wait lists with."""
        return await asyncio.get_running_loop().run_in_executor(self._threads(), self.check, replica)

    def check_all(self, replicas: list[Replica]) -> list[Evidence]:
        """:meth:`check` of each replica, all at once on the checker's own threads (``inspect``)."""
        try:
            return list(self._threads().map(self.check, replicas))
        finally:
            self.close()

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=CHECK_THREADS, thread_name_prefix="infercrane-evidence")
            return self._pool

    def close(self) -> None:
        """Let the checker's threads go (those still asking finish on their own)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    def check(self, replica: Replica) -> Evidence:
        expected = served_names(replica)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def unverifiable(reason: str, fix: str) -> Evidence:
            return Evidence("not verifiable", expected, checked_at=now, reason=reason, fix=fix)

        if self._key is None:
            return unverifiable(
                self._why_no_key,
                f"set {KEY_FILE_ENV} to the file the worker Secret's key was made from (or {KEY_ENV}) where the deploy runs",
            )
        endpoints, why = self._slices.endpoints(service_name(self._config, replica))
        addresses = [(address, port) for address, port, _ in endpoints]
        if not addresses:
            return unverifiable(why, "" if why.startswith("this identity") else "see `infercrane inspect`")
        verdicts = [(address, port, self._ask(address, port, self._key)) for address, port in addresses]
        deadline = self._clock() + self._address_wait  # a /health that is not 200 yet: asked again a while
        while any(v.health != 200 and v.status == 200 for _, _, v in verdicts) and self._clock() < deadline:
            self._sleep(1.0)
            verdicts = [(address, port, self._ask(address, port, self._key)) for address, port in addresses]
        asked = tuple(addresses)
        route = ", ".join(f"{a}:{p}" for a, p in asked)
        route = f"EndpointSlice address{'es' if len(asked) > 1 else ''} {route}"
        judged = [
            self._judge(expected, answer, route, now, asked, f"{a}:{p} " if len(asked) > 1 else "") for a, p, answer in verdicts
        ]
        # Evidence against the replica outweighs none at all: any address serving other names or
        # refusing the key decides, then any that could not be asked.
        for state in ("not serving", "refused", "not verifiable"):
            found = next((e for e in judged if e is not None and e.state == state), None)
            if found is not None:
                return found
        model_image = self._config.model_image_for(replica)
        proof = None if model_image is None else self._mounted(model_image, [pod for _, _, pod in endpoints])
        if proof is not None and proof.state == "mismatch":
            return Evidence(
                "not serving",
                expected,
                verdicts[0][2].names,
                route,
                now,
                reason=f"its weights are not the pinned ones: {proof.reason}",
                fix="check what the registry serves for that digest and the node's runtime; the old replicas keep serving",
                asked=asked,
                model_image=proof,
            )
        return Evidence("serving", expected, verdicts[0][2].names, route, now, asked=asked, model_image=proof)

    def _mounted(self, model_image: str, pods: list[str]) -> mounted.Mounted:
        """What ``pods`` (the replica's ready pods) report they mounted as ``model_image``."""
        from lightkube.resources.core_v1 import Pod

        read: dict[str, dict[str, Any]] = {}
        try:
            for name in sorted(set(pods)):
                read[name] = self._live.get(Pod, name, action=f"read pod {name} (its mounted model image)")
        except failures.Forbidden:
            return mounted.judge(model_image, {}, f"this identity may not read pods (optional: apply {POD_READER})")
        except failures.LiveError as exc:
            return mounted.judge(model_image, {}, f"its pods could not be read: {str(exc).splitlines()[0]}")
        return mounted.judge(model_image, read)

    @staticmethod
    def _judge(
        expected: tuple[str, ...], answer: Served, route: str, now: str, asked: tuple[tuple[str, int], ...], at: str
    ) -> Evidence | None:
        """What one address's answer says (``at``: which address, when several were asked); None: it serves."""
        if answer.status in (401, 403):
            return Evidence(
                "refused",
                expected,
                route=route,
                checked_at=now,
                asked=asked,
                reason=f"{at}refused the worker key ({answer.status}): the replica's key (from its Secret) "
                "is not the control plane's copy",
                fix="make the worker Secret and the control plane's copy the same key; a replica reads its Secret "
                "when it starts, so restart the replicas after a rotation",
            )
        if answer.status != 200 or answer.error:
            said = answer.error or f"HTTP {answer.status}"
            return Evidence(
                "not verifiable",
                expected,
                route=route,
                checked_at=now,
                reason=f"{at}did not answer /v1/models as an engine ({said})",
                fix="run the deploy where the pod addresses are reachable (in-cluster, or a routed pod network)",
                asked=asked,
            )
        missing = [n for n in expected if n not in answer.names]
        if answer.health != 200:
            reason = (
                f"{at}its /health answered {answer.health or 'nothing'} though /v1/models answered: the engine is "
                "not ready to serve (still warming up, or unhealthy)"
            )
            fix = "give the replica a longer startupBudgetSeconds if it is warming up, else see its logs"
        elif missing:
            reason = f"{at}serves {list(answer.names)}, expected {list(expected)}"
            fix = "check the replica's image and args (what the engine loads), or the model and name in the stack file"
        else:
            return None
        return Evidence(
            "not serving",
            expected,
            answer.names,
            route,
            now,
            reason=reason,
            fix=f"{fix}; the old replicas keep serving",
            asked=asked,
        )
        return None

    @property
    def key(self) -> str | None:
        """The worker key the checker asks with (None: there is none); never shown."""
        return self._key

    def addresses(self, replica: Replica) -> list[tuple[str, int]]:
        """The replica's ready pod addresses, as serving evidence asks them ([] none, or no right)."""
        return self._addresses(service_name(self._config, replica))[0]

    def pods(self, replica: Replica) -> list[tuple[str, int, str]]:
        """The replica's ready pod addresses with each one's pod name ([] none, or no right): a
        surge canary's pods are told from its held old pods by their ReplicaSet's name."""
        return self._slices.endpoints(service_name(self._config, replica))[0]

    def _addresses(self, service: str) -> tuple[list[tuple[str, int]], str]:
        found, why = self._slices.endpoints(service)
        return [(address, port) for address, port, _ in found], why
