"""``%relay preview``, ``steps``, ``attempts`` and ``timeline``: a run's record in the notebook
without internal imports (DataFrames bound with ``-o VAR``, a plotly figure, a preview)."""

from __future__ import annotations

import argparse
from typing import Any

from relay_notebook import commands
from relay_notebook.workspace import Workspace

__all__ = ["show_record"]


def show_record(workspace: Workspace, args: argparse.Namespace, user_ns: dict[str, Any]) -> Any:
    """The value ``%relay preview|steps|attempts|timeline RUN`` returns (and binds)."""
    if args.command == "preview":
        from relay_notebook.views.records import RecoveryPreviewView

        preview = commands.preview(workspace, args.run_id)
        return preview.to_dict() if args.json else RecoveryPreviewView(preview)
    log = commands.logs(workspace, args.run_id)
    if args.command == "timeline":
        from relay_notebook.views.timeline import timeline_figure

        figure = timeline_figure(log)
        return figure.to_dict() if args.json else figure
    from relay_notebook.views.tables import attempts_dataframe, steps_dataframe

    if args.command == "steps":
        frame = steps_dataframe(log, outputs=args.outputs)
    else:
        frame = attempts_dataframe(log)
    if args.output:
        user_ns[args.output] = frame
    return frame.to_dict(orient="records") if args.json else frame
