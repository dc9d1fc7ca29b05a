"""``python -m relay_notebook.cli``: the ``relay`` command."""

import sys

from relay_notebook.cli.entry import main

sys.exit(main())
