"""Where on a cluster a child may run: one typed value from the request to the executor.

The request carries it (`planning/request.py`), the plan keeps it, the launch
spec hands it to the executor (`backends/supervisor.py` `LaunchSpec`), and the
cluster executor's bridge places the child's actor by it (`executors/`). Here,
below all of them, so that each layer names the same type.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Placement:
    """Where on a cluster a child may run (protocol.md §8.8); only a cluster executor
    places children, so the local one refuses it."""

    resources: dict[str, float] | None = None
    """Custom resources the node must offer, by name (`{"gpu": 1}`), held while the child runs."""
    node_id: str | None = None
    """Wire name `nodeId`: the one node the child must run on."""
    labels: dict[str, str] | None = None
    """Node labels the node must carry, all of them."""
