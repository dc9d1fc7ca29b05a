"""The commands: the one API that every surface (the ``relay`` CLI, the ``%relay`` magics, the
REST server, the pytest plugin) calls, one module per family.

Each command takes a workspace and plain arguments and returns a model object; rendering, exit
codes and wording belong to the surfaces. Static commands never import or execute a relay's
source. The families: ``relays`` (the catalog, access, the vault and deletion), ``authoring``
(check, graph, publish, verify, replay), ``runs`` (run, recover, the queue, logs, uncertain
calls), ``time_travel`` (fork, lineage, diff), ``waiting`` (send, wait, wake), ``crash_each``,
``run_events``, ``run_files``, ``inputs``, ``settings`` and the recovery ``lab``.

May import: ``views``, ``runner``, ``history``, ``record``, ``workspace``, ``source``,
``errors`` and ``agentworks``; never a surface (``cli``, ``magics``, ``server``, ``testing``).
"""

import sys
import types

from relay_notebook._lazy import TYPE_CHECKING, lazy_attributes

if TYPE_CHECKING:
    from relay_notebook.commands.authoring import (
        CheckReport,
        PublishResult,
        RunFlow,
        check,
        check_draft,
        graph,
        graph_of_draft,
        publish,
        releases,
        replay,
        replay_summary,
        run_flow,
        verify,
    )
    from relay_notebook.commands.relays import (
        Deleted,
        RelaySummary,
        broken_drafts,
        delete,
        grant,
        relay_summary,
        relays,
        revoke,
        vault_names,
        vault_set,
    )
    from relay_notebook.commands.runs import (
        QueuedRun,
        enqueue,
        logs,
        pending_calls,
        preview,
        reconcile,
        recover,
        require_pool_backend,
        run,
        run_brief,
        run_detail,
        run_exists,
        run_stamp,
        runs,
        serve_worker,
        workers,
    )

# Names load on first use (PEP 562): a surface importing one family (the CLI's settings, a
# child's inputs) does not pay for every family's modules.
_LAZY = {
    "CheckReport": "relay_notebook.commands.authoring",
    "Deleted": "relay_notebook.commands.relays",
    "PublishResult": "relay_notebook.commands.authoring",
    "QueuedRun": "relay_notebook.commands.runs",
    "RelaySummary": "relay_notebook.commands.relays",
    "RunFlow": "relay_notebook.commands.authoring",
    "broken_drafts": "relay_notebook.commands.relays",
    "check": "relay_notebook.commands.authoring",
    "check_draft": "relay_notebook.commands.authoring",
    "delete": "relay_notebook.commands.relays",
    "enqueue": "relay_notebook.commands.runs",
    "grant": "relay_notebook.commands.relays",
    "graph": "relay_notebook.commands.authoring",
    "graph_of_draft": "relay_notebook.commands.authoring",
    "logs": "relay_notebook.commands.runs",
    "pending_calls": "relay_notebook.commands.runs",
    "preview": "relay_notebook.commands.runs",
    "publish": "relay_notebook.commands.authoring",
    "reconcile": "relay_notebook.commands.runs",
    "recover": "relay_notebook.commands.runs",
    "relay_summary": "relay_notebook.commands.relays",
    "relays": "relay_notebook.commands.relays",
    "releases": "relay_notebook.commands.authoring",
    "replay": "relay_notebook.commands.authoring",
    "replay_summary": "relay_notebook.commands.authoring",
    "require_pool_backend": "relay_notebook.commands.runs",
    "revoke": "relay_notebook.commands.relays",
    "run": "relay_notebook.commands.runs",
    "run_brief": "relay_notebook.commands.runs",
    "run_detail": "relay_notebook.commands.runs",
    "run_exists": "relay_notebook.commands.runs",
    "run_flow": "relay_notebook.commands.authoring",
    "run_stamp": "relay_notebook.commands.runs",
    "runs": "relay_notebook.commands.runs",
    "serve_worker": "relay_notebook.commands.runs",
    "vault_names": "relay_notebook.commands.relays",
    "vault_set": "relay_notebook.commands.relays",
    "verify": "relay_notebook.commands.authoring",
    "workers": "relay_notebook.commands.runs",
}

__all__ = [
    "CheckReport",
    "Deleted",
    "PublishResult",
    "QueuedRun",
    "RelaySummary",
    "RunFlow",
    "broken_drafts",
    "check",
    "check_draft",
    "delete",
    "enqueue",
    "grant",
    "graph",
    "graph_of_draft",
    "logs",
    "pending_calls",
    "preview",
    "publish",
    "reconcile",
    "recover",
    "relay_summary",
    "relays",
    "releases",
    "replay",
    "replay_summary",
    "require_pool_backend",
    "revoke",
    "run",
    "run_brief",
    "run_detail",
    "run_exists",
    "run_flow",
    "run_stamp",
    "runs",
    "serve_worker",
    "vault_names",
    "vault_set",
    "verify",
    "workers",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

#: the commands named as their family's module: ``commands.runs`` is the command, also once
#: the module ``commands.runs`` has loaded (the import system sets the module on the package)
_NAMED_AS_MODULES = frozenset({"relays", "runs"})


class _Commands(types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        if name in _NAMED_AS_MODULES and isinstance(value, types.ModuleType):
            return  # the command keeps its name; __getattr__ loads it on first use
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Commands
