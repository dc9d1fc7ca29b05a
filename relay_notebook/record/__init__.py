"""The run record: what a run leaves on disk, written by the runner and read by history.

Between the workspace and the layers that use runs: the run folder and its paths
(``folders``), the ledger's event vocabulary with its one writer and one reader (``ledger``),
the run's database setting (``backend``), the one read-only opener of a run's DBOS store
(``store``), its checkpoints (``checkpoints``), the typed ``run.json`` (``run_record``) and the
recovery rules (``rules``). Nothing here starts a process or launches DBOS.
"""
