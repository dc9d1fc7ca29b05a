"""Run a Jupyter application for a test as ``python -m MODULE ARGS...`` would, minus one
optional grammar: ``python tests/jupyter_app.py MODULE ARGS...``.

jupyter_events validates the server's events with jsonschema's format checkers, and with the
optional ``rfc3987_syntax`` installed (jsonschema's ``format-nongpl`` extra) importing jsonschema
builds that package's Earley grammar for IRIs: 2.6 s of the 3.3 s of CPU a Jupyter server takes
to import, paid again by each of the suite's twenty-odd servers. No event schema of Jupyter or
of the kit uses an IRI format, and jsonschema skips a checker whose package is absent, so the
servers the tests start go without it; everything else is the real server, as users run it.
"""

from __future__ import annotations

import runpy
import sys

if __name__ == "__main__":
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # "not installed"
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
