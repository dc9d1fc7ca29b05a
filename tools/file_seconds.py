"""Copy the last whole run's seconds per test file into tests/file_seconds.json.

`make test` keeps each file's seconds in pytest's cache after a run of the whole suite
(tests/file_order.py); the suite starts the longest files first from the copy in the
repository. Run this after `make test` when files were added or got slower, and commit it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".pytest_cache" / "v" / "relay" / "file_seconds"
TARGET = ROOT / "tests" / "file_seconds.json"


def main() -> int:
    try:
        seconds = json.loads(CACHE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        print(f"no whole run recorded in {CACHE}: run `make test` first", file=sys.stderr)
        return 1
    TARGET.write_text(json.dumps(seconds, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    total = sum(seconds.values())
    print(f"{len(seconds)} files, {total / 60:.1f} min of test time in all -> {TARGET}")
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {s:7.1f} s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
