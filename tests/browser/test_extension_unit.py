"""The TypeScript extension's own checks: strict type-checking, node unit tests, and parity
of its node sizing with the Python layout (so edges land on the same box borders)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import relay_notebook
from relay_notebook.source.layout import fit_label, node_size

EXTENSION = Path(__file__).parents[2] / "extension"
JLPM = shutil.which("jlpm", path=str(Path(sys.executable).parent)) or shutil.which("jlpm")
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (Node 20 builds the extension)"),
    pytest.mark.skipif(JLPM is None, reason="jlpm is not installed: pip install -e '.[test]'"),
    pytest.mark.skipif(
        not (EXTENSION / "node_modules").is_dir(),
        reason="extension/node_modules is missing: 'make setup' (pip install -e .) installs it",
    ),
]


def _jlpm(*args: str) -> subprocess.CompletedProcess[str]:
    assert JLPM is not None
    # package scripts may call jlpm again: it lives next to this Python
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        [JLPM, *args],
        cwd=EXTENSION,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_typescript_passes_strict_type_checking() -> None:
    """``jlpm lint`` (tsc --noEmit, strict) reports no error in the extension's sources."""
    done = _jlpm("lint")
    assert done.returncode == 0, done.stdout + done.stderr


def test_node_unit_tests_pass() -> None:
    """``jlpm test`` compiles the sources and node's test runner passes every test."""
    done = _jlpm("test")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "# fail 0" in output
    assert "# pass 0" not in output


LABELS = [
    ("step", "a"),
    ("step", "extract_invoice"),
    ("step", "abcdefghijklmnopq"),
    ("agent", "  spaced   out  label "),
    ("decision", 'invoice["amount"] > 1000'),
    ("decision", "x" * 40),
    ("loop", "for item in INPUT['items']"),
    ("step", "é" * 31),
    ("unresolved", "helper() from another module, dynamically dispatched"),
    ("input", "input"),
]


def test_box_sizes_and_labels_match_the_python_layout() -> None:
    """The extension sizes and cuts every label exactly as relay_notebook's layout does."""
    script = (
        "import('./lib/geometry.js').then(g => console.log(JSON.stringify("
        f"{json.dumps(LABELS)}.map(([t, l]) => [g.nodeSize(t, l), g.fitLabel(l, t)]))))"
    )
    build = _jlpm("build:lib")
    assert build.returncode == 0, build.stdout + build.stderr
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", "-e", script],
        cwd=EXTENSION,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    expected = [[list(node_size(t, label)), fit_label(label, t)] for t, label in LABELS]
    assert json.loads(done.stdout) == expected


def test_extension_version_matches_the_python_package() -> None:
    """extension/package.json carries the same version as the relay-notebook wheel."""
    package = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    assert package["version"] == relay_notebook.__version__
    assert package["jupyterlab"]["outputDir"] == "../relay_notebook/labextension"
