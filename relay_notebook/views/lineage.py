"""Lineage trees and run diffs in the notebook: an HTML tree and a DataFrame."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from relay_notebook.history.lineage import CallDiff, LineageNode, edited_calls, lineage_text

__all__ = ["LineageView", "diff_frame"]


@dataclass
class LineageView:
    """A run's forks as a nested list: each fork with the call it came from and its edits."""

    tree: LineageNode

    def _item(self, node: LineageNode) -> str:
        about = ""
        if node.fork:
            edits = node.fork.get("edits")
            edited = edited_calls(edits) if edits else []
            about = f" — from <code>{html.escape(str(node.fork.get('from')))}</code>"
            about += f" · {html.escape(str(node.fork.get('code')))} code"
            if edited:
                about += f" · edited {html.escape(', '.join(edited))}"
        children = "".join(self._item(c) for c in node.children)
        nested = f"<ul>{children}</ul>" if children else ""
        return (
            f'<li><code style="white-space:nowrap">{html.escape(node.run_id)}</code> '
            f"{html.escape(node.status)}{about}{nested}</li>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {
            "text/html": f'<ul class="relay-lineage">{self._item(self.tree)}</ul>',
            "text/plain": lineage_text(self.tree),
        }


def diff_frame(rows: list[CallDiff], a: str, b: str) -> Any:
    """The diff of runs ``a`` and ``b`` as a DataFrame indexed by call (``STEP#N``)."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            {
                "call": r["call"],
                f"status {a}": r["status_a"],
                f"status {b}": r["status_b"],
                f"attempts {a}": r["attempts_a"],
                f"attempts {b}": r["attempts_b"],
                f"output {a}": r["output_preview_a"],
                f"output {b}": r["output_preview_b"],
                "differs": r["differs"],
            }
            for r in rows
        ]
    )
    if not frame.empty:
        frame["differs"] = frame["differs"].map(lambda d: ", ".join(d) or "same")
        for column in (f"attempts {a}", f"attempts {b}"):
            frame[column] = frame[column].astype("Int64")  # a call one run never made: <NA>
        frame = frame.set_index("call")
    return frame
