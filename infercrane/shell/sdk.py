"""What the program changes of the Pulumi SDK's own habits, for its runs alone: its debug lines
and the stack traces it records. Pulumi shell.
"""

from __future__ import annotations

from typing import Any

import pulumi


def drop_debug_lines() -> None:
    """The SDK sends each of its debug lines to the engine as one blocking RPC on the event loop --
    three to five per registration (pulumi/pulumi#7292, #17481), about 12,000 for 1,000 replicas --
    that only ``--debug`` shows, and no ``infercrane`` command asks for it. A run in this process
    drops them; plain ``pulumi`` keeps them."""

    def dropped(msg: str, resource: Any = None, stream_id: Any = None, ephemeral: Any = None) -> None:
        return None

    pulumi.log.debug = dropped


def record_no_stack_traces() -> None:
    """The SDK records with every resource it registers the Python stack that registered it
    (``traceback.extract_stack``, some twenty frames) and the engine keeps it in the state: about
    2 KB a resource, with this machine's paths (the virtualenv's, the interpreter's) in a state a
    team shares. Every frame is this package's or the SDK's, none a user's; taking them was 7 % of
    the deploying process's samples in a one-replica change at 1,000 replicas (docs/benchmarks.md).
    Both paths, plain ``pulumi`` and the Automation API's, record none: an empty trace, so no
    source position either."""
    from pulumi.runtime import resource as sdk_resource
    from pulumi.runtime.proto import source_pb2

    sdk_resource._get_stack_trace = source_pb2.StackTrace
