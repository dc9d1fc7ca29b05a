"""Child side of a relay's module-level queues: ``DBOS.register_queue`` at import, registered
once DBOS is launched.

Design note: DBOS 3.4 keeps queues in its system database, so ``DBOS.register_queue`` needs a
launched DBOS, and DBOS documents it after ``DBOS.launch()``. In a relay the kit launches DBOS,
after the relay is imported (its workflows must be registered before launch, so that a
recovery finds them and can read their pickled inputs), so a module-level
``queue = DBOS.register_queue("q", ...)`` would fail at import. While the relay is imported
the child therefore takes each such call down and hands back the queue object DBOS itself
would make for the name (``DBOS.enqueue_workflow`` makes the same); right after launch it
makes the calls, with their arguments, before the run's workflow is called or recovered. A
call made once DBOS is launched (inside a workflow) goes to DBOS as it is.
"""

from __future__ import annotations

import functools
from typing import Any

from dbos import DBOS

from relay_notebook.runner.dbos_private import declared_queue

__all__ = ["DeclaredQueues"]


class DeclaredQueues:
    """The queues a relay declares at import, registered with DBOS after its launch."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._deferring = True
        self._original = DBOS.register_queue

    @property
    def names(self) -> list[str]:
        """The declared queues' names, in order (a name declared twice is listed once)."""
        return list(dict.fromkeys(name for name, _ in self.calls))

    def install(self) -> None:
        """Replace ``DBOS.register_queue`` (before the relay is imported)."""
        original = self._original

        @functools.wraps(original)
        def register_queue(name: str, **options: Any) -> Any:
            if not self._deferring:
                return original(name, **options)
            self.calls.append((name, options))
            return declared_queue(name)

        setattr(DBOS, "register_queue", staticmethod(register_queue))  # noqa: B010

    def register(self) -> None:
        """Register the declared queues (DBOS is launched; called outside its event loop)."""
        self._deferring = False
        for name, options in self.calls:
            self._original(name, **options)
