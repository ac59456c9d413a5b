"""One vocabulary for what happens to a replica or an object: the engine's step, the preflight's
verdict, the plan's line and the deploy's line are the same :class:`Action`, in one of two forms.

The value is the machine word (``--json``'s ``action``, the Pulumi engine's operation names);
:attr:`Action.planned` and :attr:`Action.done` are the words a person reads, flux's
create / configure / unchanged / delete. Pure core.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"
    SAME = "same"

    @property
    def planned(self) -> str:
        """The plan's word: create / configure / replace / delete / unchanged."""
        return WORDS[self][0]

    @property
    def done(self) -> str:
        """The deploy's word: created / configured / replaced / deleted / unchanged."""
        return WORDS[self][1]

    @classmethod
    def of_step(cls, op: Any) -> Action:
        """An engine step's operation (the Automation API's ``OpType``, a str enum, or its value)
        as what it does to its replica: every step of a replacement is a replace, a read or
        refresh changes nothing."""
        word = str(getattr(op, "value", op))
        if word in ("create-replacement", "delete-replaced", "replace", "discard-replaced"):
            return cls.REPLACE
        return cls(word) if word in ("create", "delete", "update") else cls.SAME

    @classmethod
    def strongest(cls, actions: set[Action]) -> Action:
        """One action for a replica whose objects had several (a replace outweighs a create, ...)."""
        return next((a for a in PRECEDENCE if a in actions), cls.SAME)


def replica_action(objects: Mapping[str, set[Action]]) -> Action:
    """A replica's one action from its objects' (kind -> the actions on objects of that kind), the
    same rule for the full plan (the engine's steps) and the read-only plan (the live objects): the
    strongest -- a replace outweighs a create, any object created (a Service deleted out of band and
    made again among them) is the replica's create -- except that a claim template created beside a
    workload that stays (a switch to gpuAllocation dra) configures the replica."""
    ops = {a for actions in objects.values() for a in actions}
    created = {kind for kind, actions in objects.items() if Action.CREATE in actions}
    if created == {"ResourceClaimTemplate"} and len(objects) > 1:
        ops = (ops - {Action.CREATE}) | {Action.UPDATE}
    return Action.strongest(ops)


# (planned, done), and the order a person reads them in.
WORDS: Final[Mapping[Action, tuple[str, str]]] = {
    Action.CREATE: ("create", "created"),
    Action.UPDATE: ("configure", "configured"),
    Action.REPLACE: ("replace", "replaced"),
    Action.DELETE: ("delete", "deleted"),
    Action.SAME: ("unchanged", "unchanged"),
}
PRECEDENCE: Final = (Action.REPLACE, Action.CREATE, Action.DELETE, Action.UPDATE)


def count_words(counts: Mapping[Any, int] | None, *, done: bool = False) -> str:
    """``{'create': 8, 'same': 1}`` -> ``8 to create, 1 unchanged`` (``8 created, ...`` when done):
    the engine's change summary in the same words. Keys may be the Automation API's ``OpType``
    members or plain strings; an operation outside the vocabulary keeps its name."""
    plain = {str(getattr(op, "value", op)): n for op, n in (counts or {}).items() if n}
    order = [a.value for a in WORDS]
    parts = []
    for op, n in sorted(plain.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])):
        if op not in order:
            parts.append(f"{n} {op}")
            continue
        action = Action(op)
        word = action.done if done else action.planned
        parts.append(f"{n} {word}" if done or action is Action.SAME else f"{n} to {word}")
    return ", ".join(parts) or "nothing"
