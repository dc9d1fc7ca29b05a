"""File previews of a run's execution/ folder: images inline, binaries named, JSON pretty."""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

from agentworks.redact import Redactor
from relay_notebook.history.run_files import IMAGE_LIMIT, list_run_files, read_run_file
from relay_notebook.record.folders import RunFolder
from relay_notebook.views.run_files import FilesView


def png() -> bytes:
    """A 1×1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def folder(tmp_path: Path) -> RunFolder:
    run = RunFolder("r", 1, tmp_path / "iteration-1-hook")
    (run.execution / "call-1").mkdir(parents=True)
    return run


def test_an_image_comes_inline_and_a_huge_one_does_not(tmp_path: Path) -> None:
    """A PNG is base64 data shown as an img; one over the image limit is named, not sent."""
    run = folder(tmp_path)
    (run.execution / "call-1" / "chart.png").write_bytes(png())
    (run.execution / "huge.png").write_bytes(b"\x89PNG" + b"\0" * (IMAGE_LIMIT + 1))
    small = read_run_file(run, "call-1/chart.png", None)
    assert (small.kind, small.content_type) == ("image", "image/png")
    assert base64.b64decode(small.data or "") == png()
    huge = read_run_file(run, "huge.png", None)
    assert huge.data is None and huge.truncated
    files = list_run_files(run, [])
    html = FilesView(files, {"call-1/chart.png": small, "huge.png": huge}).html()
    assert "src='data:image/png;base64," in html and "too large to show inline" in html


def test_binary_files_are_named_and_json_is_pretty(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 get no preview; JSON is indented and scrubbed."""
    run = folder(tmp_path)
    (run.execution / "blob.bin").write_bytes(b"\xff\xfe\x00\x81" * 10)
    (run.execution / "call-1" / "out.json").write_text('{"token": "hunter22", "n": 1}')
    assert read_run_file(run, "blob.bin", None).kind == "binary"
    pretty = read_run_file(run, "call-1/out.json", Redactor({"T": "hunter22"}))
    assert pretty.kind == "json" and "hunter22" not in (pretty.text or "")
    assert pretty.text is not None and pretty.text.startswith('{\n  "token": ')
