"""The cluster fixtures (tests/raycluster.py) for every module here: each module that asks
for `two_nodes` gets a two-node cluster of its own."""

from tests.raycluster import bridge, marker, supervisor, two_nodes

__all__ = ["bridge", "marker", "supervisor", "two_nodes"]
