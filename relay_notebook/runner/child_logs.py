"""The child's logging: ``DBOS.logger`` records go to the run's ledger, tagged with their step.

INFO records are kept when they come from workflow or step code (DBOS's own start-up chatter is
not); warnings always. stderr keeps only warnings and up (the attempt's stderr.log).
"""

from __future__ import annotations

import logging

from relay_notebook.record.ledger import EventWriter

__all__ = ["route_logs"]


class _EventLogHandler(logging.Handler):
    """Copies ``DBOS.logger`` records into the ledger, tagged with workflow and step ids.

    INFO records are kept when they come from workflow or step code; warnings always.
    """

    def __init__(self, events: EventWriter) -> None:
        super().__init__(level=logging.INFO)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        from dbos import DBOS

        try:
            if record.levelno < logging.WARNING and DBOS.workflow_id is None:
                return  # DBOS's own start-up chatter (migrations, versions)
            status = DBOS.step_status
            self.events.emit(
                "log",
                level=record.levelname,
                logger=record.name,
                message=record.getMessage()[:4000],
                workflow_id=DBOS.workflow_id,
                step_id=DBOS.step_id,
                step_attempt=(status.current_attempt or 0) + 1 if status else None,
            )
        except Exception:
            self.handleError(record)


def route_logs(events: EventWriter) -> None:
    """Send ``DBOS.logger`` records from INFO up to the ledger; keep stderr at WARNING."""
    logger = logging.getLogger("dbos")
    for handler in logger.handlers:
        if handler.level < logging.WARNING:
            handler.setLevel(logging.WARNING)
    logger.addHandler(_EventLogHandler(events))
    logger.setLevel(logging.INFO)
