"""The compute fingerprint: a fixed battery of GEMMs and non-GEMM kernels whose output bits are determined by the
hardware and software alone, hashed in order (SHA-256, per chunk), with the group key that says which devices
must agree bit for bit (cuBLAS: bitwise-identical results on GPUs of the same architecture and SM count with the
same toolkit, one stream).  The battery (`battery.py`, `ops.py`, `patterns.py`), the key (`key.py`), the record
(`record.py`), the judgment within a node (`judge.py`) and across a fleet (`fleet.py`)."""
