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
