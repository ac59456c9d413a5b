"""The live cluster, through lightkube only (never Pulumi), grouped by what each part is:

- :mod:`~infercrane.live.client` -- the request edge: the one connection, reads, writes, failures;
- :mod:`~infercrane.live.status` -- what a workload's status says: verdicts, the readiness wait, warnings;
- :mod:`~infercrane.live.evidence` -- what the engines say: serving evidence, a canary's counts;
- :mod:`~infercrane.live.stack` -- one stack's checks before a run: its context, the preflight, what runs now;
- on top, one module per command that reads the cluster: ``inspect``, ``doctor``, ``takeover``.

Each group imports only the groups below it (the import contract in ``pyproject.toml``).
"""
