"""What the warm parent reads of a kept network's socket tables (``runner.sandbox_net``), on
files laid out as the kernel's ``/proc/PID/net`` are, including a kernel without IPv6."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_notebook.runner import sandbox_net
from relay_notebook.runner.sandbox_net import namespace_sockets, tcp_in_use

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9527 00000000:0000 0A 00000000:00000000 00:00000000 00000000 1999999999 0 14335793 1
   1: 0100007F:9F1A 0100007F:1F90 06 00000000:00000000 03:00001234 00000000 0 0 0 3
"""
UNIX = """\
Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 31337 @relay-left
"""


@pytest.fixture
def proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    net = tmp_path / "42" / "net"
    net.mkdir(parents=True)
    monkeypatch.setattr(sandbox_net, "_PROC", str(tmp_path))
    return net


def test_sockets_with_a_descriptor_are_found_and_closing_ones_are_not(proc: Path) -> None:
    """A listening socket (its inode) and a unix socket are the namespace's; a TIME_WAIT one
    (inode 0) is not; tables this kernel lacks are skipped; without ``tcp`` none is read."""
    (proc / "tcp").write_text(TCP)
    (proc / "unix").write_text(UNIX)
    assert namespace_sockets(42) == {("tcp", 14335793), ("unix", 31337)}
    assert namespace_sockets(42, tcp=False) == {("unix", 31337)}


def test_tcp_counts_are_read_and_a_kernel_without_ipv6_counts_none(proc: Path) -> None:
    (proc / "sockstat").write_text(
        "sockets: used 34\nTCP: inuse 2 orphan 12 tw 0 alloc 77 mem 0\nUDP: inuse 0 mem 0\n"
    )
    assert tcp_in_use(42) == (2, 0)  # no sockstat6 at all
    (proc / "sockstat6").write_text("TCP6: inuse 1\nUDP6: inuse 0\n")
    assert tcp_in_use(42) == (2, 1)
