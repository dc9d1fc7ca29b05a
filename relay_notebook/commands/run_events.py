"""``relay events RUN`` and ``%relay events RUN``: what a run published (DBOS events, stream
values and messages), read by ``history.run_events`` and drawn by ``views.run_events``."""

from __future__ import annotations

from relay_notebook.history.run_events import RunEvents, read_run_events
from relay_notebook.views.run_events import events_lines

__all__ = ["RunEvents", "events_lines", "read_run_events"]
