"""Settings are read at the boundaries only: no module below them touches the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from relay_notebook.commands.settings import Settings

PACKAGE = Path(__file__).parents[2] / "relay_notebook"
# where settings may come from the environment: the CLI, the magics, the server extension
BOUNDARIES = {"cli", "commands/settings.py", "magics", "server/app.py"}
# passing the whole environment on to a subprocess reads no setting
PASS_THROUGH = {"items", "keys", "copy"}
# a child forked by the warm parent takes on, whole, the environment a spawned child gets
ADOPTS_ENVIRONMENT = {
    "runner/warm_parent.py": ["os.environ.clear()", "os.environ.update(env)"],
    # an attempt's libpq variables (PG*), for the sessions the warm parent opens for it
    "runner/warm_sessions.py": [
        "os.environ.update(variables)",
        "os.environ[name]",
        "os.environ.update(saved)",
        "os.environ.pop(name, None)",
    ],
}


def _key(node: ast.expr | None) -> str | None:
    """The variable named by ``node`` if it is a string literal, else ``None``."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def environment_reads(source: str) -> list[str]:
    """Each line that reads or writes a RELAY_ setting (or a computed key) in the environment."""
    found: list[str] = []

    def is_environ(node: ast.expr) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "environb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        )

    def flag(node: ast.AST, key: ast.expr | None, *, write: bool = False) -> None:
        name = _key(key)
        if write or name is None or name.startswith("RELAY_"):
            found.append(f"line {getattr(node, 'lineno', '?')}: {ast.unparse(node)}")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ("environ", "environb", "getenv", "putenv", "unsetenv"):
                    found.append(f"line {node.lineno}: from os import {alias.name}")
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            flag(node, node.slice, write=not isinstance(node.ctx, ast.Load))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func, first = node.func, node.args[0] if node.args else None
            if is_environ(func.value) and func.attr not in PASS_THROUGH:
                flag(node, first, write=func.attr not in ("get",))
            elif isinstance(func.value, ast.Name) and func.value.id == "os":
                if func.attr == "getenv":
                    flag(node, first)
                elif func.attr in ("putenv", "unsetenv"):
                    flag(node, first, write=True)
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            flag(node, node.left)
    return found


def below_the_boundaries() -> list[Path]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not any(rel == b or rel.startswith(b + "/") for b in BOUNDARIES):
            modules.append(path)
    return modules


def test_the_scan_covers_the_layers_below_the_boundaries() -> None:
    """The scan reads the static, workspace, runner, history and view layers and commands."""
    scanned = {p.relative_to(PACKAGE).as_posix() for p in below_the_boundaries()}
    for expected in (
        "commands/runs.py",
        "source/flow.py",
        "workspace/drafts.py",
        "runner/backend.py",
        "runner/confine.py",
        "runner/supervisor.py",
        "runner/child.py",
        "history/records.py",
        "views/mime.py",
        "server/service.py",
    ):
        assert expected in scanned, f"expected {expected} among the scanned modules"
    assert "cli/entry.py" not in scanned and "magics/relay.py" not in scanned


@pytest.mark.parametrize(
    "line",
    [
        'os.environ.get("RELAY_HOME")',
        'os.environ["RELAY_CONFINE"]',
        "os.environ.get(ENV_VAR)",
        'os.getenv("RELAY_DATABASE_URL", "")',
        'os.environ["RELAY_DATABASE_URL"] = url',
        'os.environ.pop("PATH")',
        '"RELAY_HOME" in os.environ',
        "from os import environ",
    ],
)
def test_the_scan_finds_each_way_of_reading_a_setting(line: str) -> None:
    """Each way of reading or writing a setting in the environment is reported."""
    assert environment_reads(f"import os\nurl = ENV_VAR = ''\n{line}\n"), line


def test_the_scan_allows_passing_the_environment_to_a_child() -> None:
    """Copying the whole environment for a subprocess, or reading PATH, is not a setting."""
    source = (
        "import os\n"
        "env = {k: v for k, v in os.environ.items() if k != 'X'}\n"
        "path = os.environ.get('PATH')\n"
    )
    assert environment_reads(source) == []


def test_no_module_below_the_boundaries_reads_a_setting_from_the_environment() -> None:
    """Only the CLI, the magics and the server extension read RELAY_* from the environment."""
    offenders = {}
    for path in below_the_boundaries():
        rel = path.relative_to(PACKAGE).as_posix()
        hits = environment_reads(path.read_text(encoding="utf-8"))
        if hits and [h.split(": ", 1)[1] for h in hits] != ADOPTS_ENVIRONMENT.get(rel):
            offenders[rel] = hits
    assert offenders == {}, f"expected no environment reads below the boundaries, got {offenders}"


def test_the_forked_child_only_adopts_its_whole_environment() -> None:
    """The warm parent's child replaces its environment wholesale and reads no setting."""
    source = (PACKAGE / "runner" / "warm_parent.py").read_text(encoding="utf-8")
    hits = [h.split(": ", 1)[1] for h in environment_reads(source)]
    assert hits == ADOPTS_ENVIRONMENT["runner/warm_parent.py"]


def test_settings_from_the_environment_yield_to_explicit_values() -> None:
    """Flags win over the environment; RELAY_CONFINE=0 turns confinement off."""
    environ = {"RELAY_HOME": "/env", "RELAY_DATABASE_URL": "", "RELAY_CONFINE": "0"}
    assert Settings.from_environment(environ) == Settings("/env", "", confine=False)
    chosen = Settings.from_environment(environ, home="/flag", database_url="postgresql://h/db")
    assert chosen == Settings("/flag", "postgresql://h/db", confine=False)
    assert Settings.from_environment({}) == Settings(None, None, confine=True)
    assert Settings.from_environment({"RELAY_WARM_START": "0"}).warm_start is False
    assert Settings.from_environment({}).warm_start is True
    assert Settings.from_environment({}).backend().kind == "sqlite"


def test_the_workspace_carries_the_database_password_down(tmp_path: Path) -> None:
    """A run records its database without the password; a workspace opened with the full URL
    supplies it to the layers below, and nothing else does."""
    from relay_notebook.record.run_record import RunRecord
    from relay_notebook.runner.backend import backend_for_run, workspace_backend

    url = "postgresql://me:hunter2@db.example/relays"
    run = RunRecord(
        run_id="r-1", relay="r", status="pending", code_dir="r", app_version="v", bindings={},
        created_at=0.0, deadline_ms=1.0, input={}, attempts=[], workflow_id="r-1",
        database={"kind": "postgresql", "url": "postgresql://me@db.example/relays"},
    )  # fmt: skip
    workspace = Settings(str(tmp_path), database_url=url).workspace()
    assert backend_for_run(run, workspace_backend(workspace)).url == url
    assert backend_for_run(run).url == "postgresql://me@db.example/relays"
    assert workspace_backend(Settings(str(tmp_path)).workspace()).kind == "sqlite"
