"""The notebook's run view: a live, in-place display of one run, and the buttons its header has.

Design note: the view is one display output (the relay graph MIME bundle, with SVG and text
fallbacks), updated in place through its display id, so a saved notebook keeps the last state
and renders it without a kernel. Its buttons (run again, crash after or during a step,
recover) are drawn by the JupyterLab renderer in the view's header, not by ipywidgets: a
widget's output saved without its state reads "model not found" when the notebook is opened
again. A button opens a comm (``relay_notebook.view``) to the kernel; the kernel starts the
run and streams the new run's view back on that comm while it goes, and its final state is
stored in the output, so a view started from a button is live too and survives a save.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from IPython.display import DisplayHandle, display

from relay_notebook import commands
from relay_notebook.commands import waiting
from relay_notebook.commands.authoring import FlowGraph
from relay_notebook.commands.run_events import read_run_events
from relay_notebook.commands.runs import Event, RunHandle, RunOutcome
from relay_notebook.commands.time_travel import ForkRequest
from relay_notebook.commands.waiting import Delivery
from relay_notebook.errors import RelayError, RunNotWaitingError
from relay_notebook.views import wording as surfaces
from relay_notebook.views.live import RunMonitor, Throttle, result_preview
from relay_notebook.views.mime import GRAPH_MIME
from relay_notebook.views.view_messages import (
    ErrorMessage,
    KernelMessage,
    ViewAction,
    ViewMessage,
    WorkspaceMessage,
)
from relay_notebook.workspace import Workspace

__all__ = [
    "COMM_TARGET",
    "WATCHER",
    "RunView",
    "RunWatcher",
    "ViewChannel",
    "button_error",
    "register_view_channel",
]

COMM_TARGET = "relay_notebook.view"
_FINISHED = frozenset({"succeeded", "failed", "denied", "rejected"})
#: statuses of a run that may go on by itself: a view keeps reading it
_GOING = frozenset({"starting", "pending", "queued", "running"})
#: how often a live view reads the run again between the supervisor's events: what the workflow
#: body publishes (set_event, write_stream) comes with no event of its own
POLL_S = 0.5
#: how long a view that answered a run waits for it to leave ``waiting``, with no attempt of
#: its own to follow (the message went to a process already waiting, or to a worker)
ANSWER_FOLLOW_S = 15.0

Sink = Callable[[dict[str, Any], bool], None]


class RunView:
    """One run as it happens: the flow graph painted from its history, updated in place."""

    def __init__(
        self, workspace: Workspace, relay: str, flow: FlowGraph, shell: Any, output: str | None
    ) -> None:
        self.workspace = workspace
        self.relay = relay
        self.shell = shell
        self.output = output
        self.monitor = RunMonitor(
            flow,
            lambda run_id: commands.logs(workspace, run_id),
            read_events=lambda run_id: read_run_events(workspace, run_id).latest(),
        )
        self.handle: RunHandle | None = None
        #: set once the view's run can change no more (its attempt ended, or following it did)
        self.finished = threading.Event()
        #: follow the run wherever it changes after this view's attempt ended (``WATCHER``);
        #: ``False`` for a ``--wait`` view: the state at that moment, as a saved notebook (and
        #: nbval) keeps it; its buttons, pressed later, show the run as it is then
        self.follows = True
        self._display: DisplayHandle | None = None
        #: also told of every push (the comm of a view started from a button); True when final
        self.sinks: list[Sink] = []
        self._lock = threading.Lock()
        self._pushing = threading.Lock()
        self.throttle = Throttle(self._push)

    def __repr__(self) -> str:
        return self.monitor.summary()

    @property
    def flow(self) -> FlowGraph:
        return self.monitor.flow

    # -- starting -----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        workspace: Workspace,
        target: str,
        *,
        run_input: Any,
        release: str | None,
        crash: str | None = None,
        shell: Any,
        output: str | None = None,
        sinks: list[Sink] | None = None,
    ) -> RunView:
        draft = workspace.resolve_target(target)
        view = cls(workspace, draft.name, commands.graph_of_draft(draft), shell, output)
        view.sinks.extend(sinks or [])
        handle = commands.run(
            workspace,
            target,
            run_input=run_input,
            release=release,
            crash=crash,
            on_event=view._on_event,
        )
        view._attach(handle)
        return view

    @classmethod
    def recover(
        cls,
        workspace: Workspace,
        run_id: str,
        *,
        shell: Any,
        output: str | None = None,
        sinks: list[Sink] | None = None,
    ) -> RunView:
        log = commands.logs(workspace, run_id)
        view = cls.of_run(workspace, run_id, shell, output)
        view.sinks.extend(sinks or [])
        before = log.run.status
        if before in _FINISHED:
            view.monitor.note = f"the run had already {_ended(before)}: nothing was left to recover"
        handle = commands.recover(workspace, run_id, on_event=view._on_event)
        view._attach(handle)
        return view

    @classmethod
    def fork(
        cls,
        workspace: Workspace,
        run_id: str,
        *,
        request: ForkRequest,
        shell: Any,
        output: str | None = None,
        sinks: list[Sink] | None = None,
        crash: str | None = None,
    ) -> RunView:
        """The fork of ``run_id`` ``request`` asks for (from its ``STEP#N``, with its edits,
        release or draft), live, with ``crash`` injected into its first attempt."""
        from relay_notebook.commands.time_travel import fork

        view = cls.of_run(workspace, run_id, shell, output)
        view.sinks.extend(sinks or [])
        handle = fork(workspace, run_id, request, crash=crash, on_event=view._on_event)
        view._attach(handle)
        return view

    @classmethod
    def send(
        cls,
        workspace: Workspace,
        run_id: str,
        topic: str,
        message: Any,
        *,
        idempotency_key: str | None = None,
        shell: Any,
        output: str | None = None,
        sinks: list[Sink] | None = None,
    ) -> tuple[RunView, Delivery]:
        """Send ``message`` to ``run_id``; the view follows the attempt it resumes, if any."""
        view = cls.of_run(workspace, run_id, shell, output)
        view.sinks.extend(sinks or [])
        delivery = waiting.send(
            workspace, run_id, topic, message, idempotency_key=idempotency_key,
            on_event=view._on_event,
        )  # fmt: skip
        if delivery.handle is not None:
            view._attach(delivery.handle)
        else:
            view.monitor.refresh()
        return view, delivery

    @classmethod
    def of_run(
        cls, workspace: Workspace, run_id: str, shell: Any, output: str | None = None
    ) -> RunView:
        """A view of ``run_id`` drawn on the code it ran (never the draft as it is now)."""
        flow = commands.run_flow(workspace, run_id)
        view = cls(workspace, flow.relay, flow.graph, shell, output)
        view.monitor.code = flow.code
        view.monitor.run_id = run_id
        return view

    def _attach(self, handle: RunHandle) -> None:
        self.handle = handle
        if handle.run_id != self.monitor.run_id:  # a new run (a start, a fork): its own code
            flow = commands.run_flow(self.workspace, handle.run_id)
            self.monitor.draw_on(flow.graph, flow.code)
        self.monitor.run_id = handle.run_id
        self.monitor.refresh()
        handle.add_done_callback(self._on_done)
        threading.Thread(target=self._poll, name=f"relay-view-{handle.run_id}", daemon=True).start()

    def _poll(self) -> None:
        """Ask for a repaint every ``POLL_S`` while the attempt goes (the events and streams
        the workflow body writes)."""
        while not self.finished.wait(POLL_S):
            self.throttle.request()

    def _follow(self) -> None:
        """Follow a run this view started no attempt of: repaint until it stops changing."""

        def follow() -> None:
            begun = time.monotonic()
            while True:
                self.monitor.refresh()
                status = self.monitor.status
                quiet = status == "waiting" and time.monotonic() - begun > ANSWER_FOLLOW_S
                if (status not in _GOING and status != "waiting") or quiet:
                    break
                self.throttle.request()
                time.sleep(POLL_S)
            self.finished.set()
            self.throttle.flush()
            if self.monitor.status not in _FINISHED and self.follows:
                WATCHER.watch(self)

        self.monitor.refresh()
        threading.Thread(
            target=follow, name=f"relay-follow-{self.monitor.run_id}", daemon=True
        ).start()

    # -- updates (called from the supervisor's reader thread) ---------------------------------

    def _on_event(self, event: Event) -> None:
        self.throttle.request()

    def _on_done(self, outcome: RunOutcome) -> None:
        if self.output and outcome.status == "succeeded" and self.shell is not None:
            self.shell.user_ns[self.output] = outcome.result
        if outcome.status == "succeeded" and self.follows:
            # a live view's cell returned long ago: its header shows what the run returned
            self.monitor.result = result_preview(outcome.result)
        self.finished.set()
        self.throttle.flush()
        if outcome.status not in _FINISHED and self.follows:
            WATCHER.watch(self)  # waiting, interrupted...: it may go on from anywhere

    def _push(self) -> None:
        # one push at a time: the poller's and the supervisor's threads both push, and a push
        # that read the run earlier must not be painted (or sent) after the final one
        with self._pushing:
            done = self.finished.is_set() and (
                self.handle is None or self.handle.outcome is not None
            )
            self.monitor.refresh()
            bundle = self.monitor.bundle()
            with self._lock:
                if self._display is not None:
                    self._display.update(bundle, raw=True)
                sinks = list(self.sinks)
            for sink in sinks:
                sink(bundle, done)

    # -- showing ------------------------------------------------------------------------------

    def show(self) -> None:
        """Display the live view (once); it updates in place until the attempt ends."""
        with self._lock:
            self._display = display(self.monitor.bundle(), raw=True, display_id=True)

    def wait(self, timeout: float | None = None) -> RunOutcome:
        """Block until the attempt ends; the view shows the final state."""
        assert self.handle is not None
        outcome = self.handle.wait(timeout)
        self._on_done(outcome)
        return outcome

    @property
    def outcome(self) -> RunOutcome | None:
        return self.handle.outcome if self.handle else None


class RunWatcher:
    """Keeps views whose run may still change, though no attempt of theirs goes, following it.

    Design note: a waiting run is answered from anywhere (another cell, ``relay send`` in a
    terminal, REST, the side panel, a worker), an interrupted one recovered from anywhere. One
    kernel thread compares each watched run's stamp (``commands.run_stamp``: a stat of its
    record and ledger, no read) every ``interval`` seconds and repaints a view whose run
    changed, in place (its display, its comm), until the run is finished. It stops when no view
    is watched.
    """

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._views: dict[int, tuple[RunView, tuple[int, ...] | None]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, view: RunView) -> None:
        """Follow ``view``'s run from now on (once per view)."""
        run_id = view.monitor.run_id
        if run_id is None:
            return
        stamp = self._stamp(view)
        with self._lock:
            self._views.setdefault(id(view), (view, stamp))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="relay-view-watcher", daemon=True
                )
                self._thread.start()

    def forget(self, view: RunView) -> None:
        """Stop following ``view``'s run."""
        self._drop(id(view))

    def watching(self, view: RunView) -> bool:
        with self._lock:
            return id(view) in self._views

    @staticmethod
    def _stamp(view: RunView) -> tuple[int, ...] | None:
        try:
            return commands.run_stamp(view.workspace, str(view.monitor.run_id))
        except RelayError:
            return None  # the run was deleted: nothing more to follow

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                watched = list(self._views.items())
                if not watched:
                    self._thread = None
                    return
            for key, (view, last) in watched:
                stamp = self._stamp(view)
                if stamp is None:
                    self._drop(key)
                    continue
                if stamp == last:
                    continue
                with self._lock:
                    if key in self._views:
                        self._views[key] = (view, stamp)
                try:
                    view._push()
                except Exception:  # a view whose output went away: the run goes on regardless
                    self._drop(key)
                    continue
                if view.monitor.status in _FINISHED:
                    self._drop(key)

    def _drop(self, key: int) -> None:
        with self._lock:
            self._views.pop(key, None)


#: the kernel's one watcher of views whose run may change elsewhere
WATCHER = RunWatcher()


def button_error(exc: Exception, action: ViewAction, status: str | None) -> str:
    """What a view's button says when its action cannot start, worded for the notebook (no
    terminal commands, no ``[code]``): e.g. the run was answered elsewhere meanwhile."""
    run_id = action.get("run_id") or "this run"
    if isinstance(exc, RunNotWaitingError) and action.get("action") == "send" and status:
        return (
            f"Not sent: run {run_id} is no longer waiting (it is {status.replace('_', ' ')} "
            "now: another cell, a terminal or the side panel answered it). The view now shows "
            "it as it is."
        )
    return surfaces.reword(" ".join(str(exc).split()), "notebook")


def _ended(status: str) -> str:
    return {"denied": "been denied", "rejected": "been rejected"}.get(status, status)


class ViewChannel:
    """The kernel's end of one view's comm: runs what the view's buttons ask for
    (``ViewAction``), and sends the resulting run's view back as it goes (``ViewMessage``)."""

    def __init__(self, comm: Any, workspace: Callable[[], Workspace], shell: Any) -> None:
        self.comm = comm
        self.workspace = workspace
        self.shell = shell
        self.views: list[RunView] = []
        comm.on_msg(self.handle)

    def _reply(self, message: KernelMessage) -> None:
        self.comm.send(message)

    def _send(self, bundle: dict[str, Any], final: bool) -> None:
        try:
            self._reply(ViewMessage(type="view", final=final, bundle=bundle))
        except Exception:  # the page went away: the run goes on, its record keeps it
            return

    def handle(self, msg: dict[str, Any]) -> None:
        """Act on one message from the view (the comm's open carries the first action)."""
        # the comm's message: its data is what the view sent, a ViewAction (checked in act)
        data: ViewAction = msg.get("content", {}).get("data") or ViewAction()
        if data.get("action") == "workspace":  # the side panel asks which workspace we use
            self._reply(WorkspaceMessage(type="workspace", home=str(self.workspace().home)))
            return
        try:
            view = self.act(data)
        except Exception as exc:  # shown in the view's header, never a traceback
            self._reply(self._error(exc, data))
            return
        self.views.append(view)

    def _error(self, exc: Exception, data: ViewAction) -> ErrorMessage:
        """The error for ``exc``, with the view's run as it is now (the button acted on a state
        the run has left: the view catches up with it)."""
        run_id = str(data.get("run_id") or "")
        bundle = None
        if run_id:
            try:
                view = RunView.of_run(self.workspace(), run_id, self.shell)
                view.monitor.refresh()
                bundle = view.monitor.bundle()
            except Exception:
                bundle = None  # no such run (any more): the error says what happened
        status = None if bundle is None else bundle[GRAPH_MIME]["run"].get("status")
        message = ErrorMessage(type="error", message=button_error(exc, data, status))
        if bundle is not None:
            message["bundle"] = bundle
        return message

    def act(self, data: ViewAction) -> RunView:
        """Start what ``data`` asks: run again (with a ``crash``), recover, fork ``from`` a
        call, or ``send`` a message on a ``topic``, for the view's ``run_id``."""
        action = data.get("action")
        run_id = str(data.get("run_id") or "")
        workspace = self.workspace()
        if action == "send":
            topic = data.get("topic")
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"cannot answer run {run_id}: the view named no topic to send on")
            view, delivery = RunView.send(
                workspace, run_id, topic, data.get("message"), shell=self.shell,
                sinks=[self._send],
            )  # fmt: skip
            view.monitor.note = (
                f"{waiting.delivery_line(delivery, 'notebook')} (this view's button)"
            )
            if delivery.handle is None:
                view._follow()  # a live attempt receives it, or it resumes elsewhere
            return view
        if action == "recover":
            view = RunView.recover(workspace, run_id, shell=self.shell, sinks=[self._send])
            view.monitor.note = view.monitor.note or "recovered with this view's button"
            return view
        if action == "run":
            log = commands.logs(workspace, run_id)
            crash = data.get("crash")
            frozen = log.run.release  # runs its release again (a draft's run: the draft)
            view = RunView.start(
                workspace,
                log.run.relay,
                run_input=log.run.input or {},
                release=f"v{frozen['version']}" if frozen else None,
                crash=str(crash) if crash else None,
                shell=self.shell,
                sinks=[self._send],
            )
            how = f"--crash {crash}" if crash else "run again"
            view.monitor.note = f"started with this view's button ({how}, {run_id}'s input)"
            return view
        if action == "fork":
            call = str(data.get("from") or "")
            view = RunView.fork(
                workspace, run_id, request=ForkRequest(call, draft=bool(data.get("draft"))),
                shell=self.shell, sinks=[self._send],
            )  # fmt: skip
            view.monitor.note = f"forked from {run_id} at {call} with this view's button"
            return view
        raise ValueError(
            f"unknown view action {action!r}; expected 'run', 'recover', 'fork', 'send' or "
            "'workspace'"
        )


def register_view_channel(shell: Any, workspace: Callable[[], Workspace]) -> bool:
    """Let views' buttons reach this kernel (False outside a kernel, e.g. a plain shell)."""
    kernel = getattr(shell, "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False

    def opened(comm: Any, msg: dict[str, Any]) -> None:
        ViewChannel(comm, workspace, shell).handle(msg)  # the action comes with the open

    manager.register_target(COMM_TARGET, opened)
    return True
