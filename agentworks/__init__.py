"""agentworks: the adapter that authored relays import (agent, mcp, tool, vault, ...).

The adapter's calls land with issue #4; until then this package only reserves the name so that
relays written against it pass admission and draw their flow graph.
"""

__all__: list[str] = []
