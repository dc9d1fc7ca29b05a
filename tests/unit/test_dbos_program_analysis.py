"""The static analysis of DBOS programs as relays: sync entry points, child workflows and queues,
``run_step``, fan-outs, datasource transactions, and DBOS 2 spellings refused at admission."""

from __future__ import annotations

import textwrap

import pytest

from relay_notebook.source.admission import admit_source, check_source, entrypoint_kind
from relay_notebook.source.flow import build_flow_graph
from relay_notebook.source.graph import FlowGraph
from tests.relays import steps


def program(body: str) -> str:
    return textwrap.dedent(body)


def with_steps(names: tuple[str, ...], body: str, header: str = "from dbos import DBOS\n\n") -> str:
    """A program of ``header``, the identity steps ``names``, then ``body`` (dedented)."""
    return header + steps(*names) + program(body)


def with_steps_and_run(names: tuple[str, ...], run_body: str) -> str:
    """A program of the identity steps ``names`` and a workflow ``run`` of ``run_body``."""
    return with_steps(
        names, "@DBOS.workflow()\nasync def run(INPUT):\n" + textwrap.indent(run_body, "    ")
    )


def labels(graph: FlowGraph, kind: str) -> list[str]:
    return [n.label for n in graph.nodes if n.type == kind]


def codes(source: str) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in check_source(source)]


# -- sync workflows ---------------------------------------------------------------------------

SYNC = program(
    """\
    from dbos import DBOS

    @DBOS.step()
    def fetch(n):
        return n

    @DBOS.workflow()
    def run(INPUT):
        DBOS.sleep(1)
        message = DBOS.recv("go")
        return fetch(message)
    """
)


def test_a_sync_workflow_entry_point_is_admitted_and_drawn_like_an_async_one() -> None:
    """`def run(INPUT)` under @DBOS.workflow() is a workflow entry point, with its sync calls."""
    assert check_source(SYNC) == []
    assert entrypoint_kind(SYNC) == "workflow"
    graph = build_flow_graph(SYNC)
    assert [n.type for n in graph.nodes] == ["input", "sleep", "wait", "step", "output"]
    assert graph.notes == []


def test_a_sync_run_without_the_decorator_is_told_both_forms() -> None:
    """An undecorated `def run(INPUT)` is refused; the message names the sync form too."""
    (found,) = admit_source("def run(INPUT):\n    return INPUT\n")
    assert found.code == "entrypoint-not-workflow"
    assert "def run(INPUT)" in found.message and "@DBOS.workflow()" in found.message


# -- DBOS 2 spellings -------------------------------------------------------------------------


def test_dbos_transaction_is_refused_with_the_datasource_api_named() -> None:
    """`@DBOS.transaction()` (gone in DBOS 3) is an admission error pointing at @ds.transaction."""
    source = program(
        """\
        from dbos import DBOS

        @DBOS.transaction()
        def insert(x):
            return x

        @DBOS.workflow()
        async def run(INPUT):
            return insert(1)
        """
    )
    (found,) = admit_source(source)
    assert (found.code, found.line) == ("dbos-transaction-removed", 3)
    assert "SQLAlchemyDatasource.create" in found.message
    assert "@ds.transaction()" in found.message and "`insert`" in found.message


def test_a_queue_built_directly_is_refused_with_register_queue_named() -> None:
    """`Queue("q")` fails at import under DBOS 3.4: refused, with DBOS.register_queue as fix."""
    source = program(
        """\
        from dbos import DBOS, Queue

        queue = Queue("q")

        @DBOS.workflow()
        async def run(INPUT):
            return 1
        """
    )
    assert codes(source) == [("dbos-queue-constructed", 3)]
    assert "DBOS.register_queue" in admit_source(source)[0].message


# -- child workflows and queues ---------------------------------------------------------------

CHILDREN = with_steps(
    ("a", "b"),
    """\
    @DBOS.workflow()
    async def child(x):
        y = await a(x)
        return await b(y)

    @DBOS.workflow()
    async def run(INPUT):
        first = await child(1)
        handle = await DBOS.start_workflow_async(child, 2)
        queued = await queue.enqueue_async(child, 3)
        other = await DBOS.enqueue_workflow_async("other", child, 4)
        return [first, await handle.get_result(), await queued.get_result(),
                await other.get_result()]
    """,
    header='from dbos import DBOS\n\nqueue = DBOS.register_queue("q")\n'
    'DBOS.register_queue("other", worker_concurrency=2)\n\n',
)


def test_each_child_workflow_is_drawn_with_its_own_steps() -> None:
    """Awaited, started, enqueued on a queue object or by name: a workflow node, then the
    child's steps, each attributed to that node; handles' results draw nothing."""
    assert check_source(CHILDREN) == []
    graph = build_flow_graph(CHILDREN)
    children = [n for n in graph.nodes if n.type == "workflow"]
    assert [n.details.get("via") for n in children] == [
        None,
        "DBOS.start_workflow_async",
        "queue.enqueue_async",
        "DBOS.enqueue_workflow_async",
    ]
    steps = [(n.label, n.details["in_workflow"]) for n in graph.nodes if n.type == "step"]
    assert steps == [(s, c.id) for c in children for s in ("a", "b")]
    assert labels(graph, "unresolved") == []
    path = [e.target for e in graph.edges]
    assert path.index(children[1].id) > path.index("step-b")  # children in call order


def test_call_sites_in_a_child_start_at_the_call_that_runs_it() -> None:
    """A child awaited directly keeps its caller's line in its steps' sites (the stack has it);
    one started by DBOS runs from DBOS's frames, so its steps' sites are their own lines."""
    graph = build_flow_graph(CHILDREN)
    assert graph.node("step-a").details["site"] == [21, 16]
    assert "site" not in graph.node("step-a-2").details


def test_a_child_workflow_that_calls_itself_is_drawn_once() -> None:
    """A recursive child workflow ends in an unresolved "recursive call" node, not a loop."""
    source = program(
        """\
        from dbos import DBOS

        @DBOS.workflow()
        async def walk(n):
            if n:
                return await walk(n - 1)
            return 0

        @DBOS.workflow()
        async def run(INPUT):
            return await walk(3)
        """
    )
    graph = build_flow_graph(source)
    assert labels(graph, "workflow") == ["walk"]
    assert len(labels(graph, "unresolved")) == 1


# -- run_step ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "label"),
    [
        ('await DBOS.run_step_async({"name": "shouting"}, shout, "hi")', "shouting"),
        ('await DBOS.run_step_async(None, shout, "hi")', "shout"),
        ("DBOS.run_step(None, lambda: 1)", "<lambda>"),
    ],
)
def test_run_step_is_a_step_named_as_dbos_records_it(call: str, label: str) -> None:
    """DBOS.run_step[_async](options, fn, ...): a step node named by options["name"], else by
    the function (what DBOS records, and what --crash names)."""
    source = program(
        f"""\
        from dbos import DBOS

        def shout(text):
            return text.upper()

        @DBOS.workflow()
        async def run(INPUT):
            return {call}
        """
    )
    graph = build_flow_graph(source)
    (step,) = [n for n in graph.nodes if n.type == "step"]
    assert step.label == label and step.details["name"] == label
    assert step.details["via"].startswith("DBOS.run_step")


# -- fan-outs ---------------------------------------------------------------------------------

FAN_OUT = with_steps(
    ("fast", "slow"),
    """\
    @DBOS.workflow()
    async def run(INPUT):
        f = fast(1)
        s = slow(2)
        done, pending = await DBOS.asyncio_wait([f, s], return_when=asyncio.FIRST_COMPLETED)
        tasks = [asyncio.create_task(fast(i)) for i in range(3)]
        await asyncio.wait(tasks)
        coros = [slow(i) for i in range(2)]
        return await asyncio.gather(*coros)
    """,
    header="import asyncio\n\nfrom dbos import DBOS\n\n",
)


def test_coroutines_made_first_are_drawn_where_the_fan_out_runs_them() -> None:
    """asyncio_wait of coroutines made on earlier lines, asyncio.wait of tasks, gather of a
    list of coroutines: three parallel nodes whose branches are the steps."""
    graph = build_flow_graph(FAN_OUT)
    assert labels(graph, "parallel") == ["wait", "wait", "gather"]
    first = graph.nodes[1]
    assert first.type == "parallel"
    branches = sorted(e.target for e in graph.edges if e.source == first.id)
    assert branches == ["step-fast", "step-slow"]
    assert graph.node("step-fast-2").details["note"] == "one per item of range(3)"
    assert graph.node("step-slow-2").details["note"] == "one per item of range(2)"


def test_coroutines_handed_to_a_fan_out_later_are_not_missing_an_await() -> None:
    """No [missing-await] for coroutines assigned, then awaited or handed to a fan-out."""
    assert check_source(FAN_OUT) == []


def test_a_coroutine_assigned_and_never_handed_on_still_warns() -> None:
    """A coroutine kept in a name nothing awaits is the mistake the lint is for."""
    source = with_steps_and_run(("fast",), 'f = fast(1)\nreturn {"f": str(f)}\n')
    assert codes(source) == [("missing-await", 9)]


def test_a_coroutine_never_run_draws_nothing() -> None:
    """A coroutine made and never awaited never runs: the graph draws no step for it."""
    source = with_steps_and_run(("fast",), "unused = fast(1)\nreturn await fast(2)\n")
    graph = build_flow_graph(source)
    assert [n.line for n in graph.nodes if n.type == "step"] == [10]


# -- datasource transactions ------------------------------------------------------------------

TRANSACTIONS = program(
    """\
    import sqlalchemy as sa
    from dbos import DBOS, SQLAlchemyDatasource

    ds = SQLAlchemyDatasource.create("sqlite:///app.sqlite")

    @ds.transaction()
    def insert(name):
        ds.sql_session().execute(sa.text("INSERT INTO t VALUES (:n)"), {"n": name})

    @ds.transaction(name="counting", isolation_level="READ COMMITTED")
    def count():
        return ds.sql_session().execute(sa.text("SELECT count(*) FROM t")).scalar()

    @DBOS.workflow()
    def run(INPUT):
        insert(INPUT["name"])
        return count()
    """
)


def test_datasource_transactions_are_transaction_nodes_committed_with_their_checkpoint() -> None:
    """`@ds.transaction()` functions: step nodes marked with their datasource (crash points
    named as DBOS records them), guaranteed once: the checkpoint commits with them."""
    assert check_source(TRANSACTIONS) == []
    graph = build_flow_graph(TRANSACTIONS)
    assert labels(graph, "unresolved") == []
    insert, count = (n for n in graph.nodes if n.type == "step")
    assert (insert.label, count.label) == ("insert", "counting")
    assert insert.details["transaction"] == count.details["transaction"] == "ds"
    assert count.details["isolation_level"] == "READ COMMITTED"
    guarantee = count.details["guarantee"]
    assert (guarantee["kind"], guarantee["badge"]) == ("recorded_once", "1×")
    assert "commits together with its checkpoint" in guarantee["text"]
