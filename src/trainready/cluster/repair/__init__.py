"""The repair loop: the drain reasons' vocabulary (`reasons.py`), drains and resumes (`ledger.py`), the jobs a failed
node ran since its last pass (`jobs.py`, Slurm accounting), each node's last pass (`coverage.py`) and the RMA folder
of a drained node (`rma/`)."""
