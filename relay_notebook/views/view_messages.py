"""The run view's comm messages, typed: what its buttons ask the kernel, and what comes back.

Design note: the view (``extension/src/header.ts``'s ``ViewAction``, ``mime.ts``'s handler) and
the kernel (``magics.runs.ViewChannel``) speak over one comm, ``relay_notebook.view``. As
anywidget types its own messages, each kind here is a TypedDict, named by its ``type`` (kernel
to view) or ``action`` (view to kernel), so the two ends cannot drift unseen.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "ErrorMessage",
    "KernelMessage",
    "ViewAction",
    "ViewMessage",
    "WorkspaceMessage",
]

#: what a run view's buttons can ask for (``workspace``: the side panel asks which one is used)
ActionName = Literal["run", "recover", "fork", "send", "workspace"]

# A view's action; every field but ``action`` is optional ("from" is a keyword, hence the
# functional form): ``run_id`` (the run the view shows), ``crash`` (``after:STEP``, for run),
# ``topic`` and ``message`` (for send), ``from`` (``STEP#N``) and ``draft`` (for fork).
ViewAction = TypedDict(
    "ViewAction",
    {
        "action": ActionName,
        "run_id": str,
        "crash": str,
        "topic": str,
        "message": Any,
        "from": str,
        "draft": bool,
    },
    total=False,
)


class ViewMessage(TypedDict):
    """The run a view's action started, as it goes (``final``: its last state)."""

    type: Literal["view"]
    final: bool
    #: the relay graph document, its SVG and text fallbacks (``RunMonitor.bundle``)
    bundle: dict[str, Any]


class WorkspaceMessage(TypedDict):
    """The workspace this kernel's views use (the side panel asks)."""

    type: Literal["workspace"]
    home: str


class ErrorMessage(TypedDict):
    """An action that could not start: shown in the view's header, worded for the notebook."""

    type: Literal["error"]
    message: str
    #: the view's run as it is now (e.g. a waiting run answered elsewhere), shown with it
    bundle: NotRequired[dict[str, Any]]


#: every message the kernel sends a view
KernelMessage = ViewMessage | WorkspaceMessage | ErrorMessage
