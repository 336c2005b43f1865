"""OpenMP's wait policy for rank processes: imported first by the ranks' forkserver (forkserver.PRELOAD),
before torch loads libgomp, which reads OMP_WAIT_POLICY once, when it loads.  No other process imports it.

Ranks share the machine's cores: with one another (8 gloo ranks on a 2-core machine), and with their own
communication threads (gloo's, NCCL's proxy), and a rank spends most of a collective waiting.  Without a
policy, libgomp keeps a thread that has finished its share of an op spinning on its core, up to
GOMP_SPINCOUNT = 300000 iterations, before it sleeps (libgomp manual, "GOMP_SPINCOUNT"); PASSIVE puts it to
sleep at once, so the core goes to the rank or thread that has work.  Intra-op threads per rank are set
in the rank itself (launch: usable cores / local ranks).  A policy the user gave is kept."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
