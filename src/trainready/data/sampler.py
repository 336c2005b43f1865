"""Deterministic, exactly resumable sequence sampler, one per data-parallel rank.

Windows: window k covers tokens [k*T, k*T + T + 1) of the concatenated stream
(T = seq_len; the extra token is the last target), k in [0, W) with
W = (num_tokens - 1) // T.  Epoch e visits the windows in the order
`Generator(PCG64(seed + e)).permutation(W)`; global batch b is entries
[b*G, (b+1)*G) of it (G = batch_size * world_size) and rank r takes entries
b*G + r + j*world_size, j < batch_size: every world_size-th window, disjoint
across ranks.  The tail of W that does not fill a global batch is dropped, so
every rank sees the same number of batches per epoch.

The whole state is (seed, epoch, position = batches this rank has taken in
this epoch); it uses no global RNG, so saving and restoring it resumes the
stream exactly.
"""

from __future__ import annotations

import numpy as np

from trainready.data.source import TokenSource
from trainready.errors import DataError

STATE_KEYS = ("seed", "epoch", "position", "rank", "world_size", "seq_len", "batch_size", "num_tokens", "num_windows")
# What ties a saved position to the data it indexes: source.fingerprint() (sizes + sampled blocks).
SOURCE_KEY = "source_fingerprint"


class SequenceSampler:
    def __init__(self, source: TokenSource, seq_len: int, batch_size: int, seed: int,
                 rank: int = 0, world_size: int = 1) -> None:
        if seq_len < 1 or batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"sampler: need seq_len>=1, batch_size>=1, 0<=rank<world_size; got seq_len={seq_len}, "
                             f"batch_size={batch_size}, rank={rank}, world_size={world_size}")
        if seed < 0:
            raise ValueError(f"sampler: seed must be >= 0 (PCG64 seed), got {seed}")
        self.source = source
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0
        self.position = 0
        self.num_windows = max(0, (source.num_tokens - 1) // seq_len)
        global_batch = batch_size * world_size
        self.batches_per_epoch = self.num_windows // global_batch
        if self.batches_per_epoch == 0:
            raise DataError(
                f"{source.path}: size: found {source.num_tokens} tokens = {self.num_windows} windows of "
                f"seq_len+1={seq_len + 1}, expected at least batch_size x world_size = {global_batch} windows "
                f"(>= {global_batch * seq_len + 1} tokens)")
        self._perm_epoch = -1
        self._perm = np.empty(0, dtype=np.int64)
        self._fingerprint: str | None = None

    # -- order ---------------------------------------------------------------------------------
    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            rng = np.random.Generator(np.random.PCG64(self.seed + epoch))
            self._perm = rng.permutation(self.num_windows).astype(np.int64)
            self._perm_epoch = epoch
        return self._perm

    def window_indices(self, epoch: int, batch: int) -> np.ndarray:
        """Window ids this rank reads for global batch `batch` of `epoch`: shape [batch_size]."""
        g = self.batch_size * self.world_size
        base = batch * g + self.rank
        return self._permutation(epoch)[base:base + g:self.world_size]

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """x, y: [batch_size, seq_len] int64, y[:, t] = x[:, t+1] of the same window (next-token targets)."""
        if self.position >= self.batches_per_epoch:
            self.epoch += 1
            self.position = 0
        windows = self.window_indices(self.epoch, self.position)
        t = self.seq_len
        buf = np.empty((self.batch_size, t + 1), dtype=np.int64)
        for i, k in enumerate(windows):
            buf[i] = self.source.tokens(int(k) * t, t + 1)
        self.position += 1
        return buf[:, :-1].copy(), buf[:, 1:].copy()

    def windows_ahead(self, batches: int) -> np.ndarray:
        """Window ids the next `batches` calls of next_batch will read, in order (state unchanged)."""
        epoch, position, out = self.epoch, self.position, []
        for _ in range(batches):
            if position >= self.batches_per_epoch:
                epoch, position = epoch + 1, 0
            out.append(self.window_indices(epoch, position))
            position += 1
        return np.concatenate(out) if out else np.empty(0, dtype=np.int64)

    # -- state ---------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """The source's fingerprint, computed once (milliseconds: sampled blocks, see megatron.sample_hash)."""
        if self._fingerprint is None:
            self._fingerprint = self.source.fingerprint()
        return self._fingerprint

    def state_dict(self) -> dict[str, int | str]:
        return {"seed": self.seed, "epoch": self.epoch, "position": self.position, "rank": self.rank,
                "world_size": self.world_size, "seq_len": self.seq_len, "batch_size": self.batch_size,
                "num_tokens": int(self.source.num_tokens), "num_windows": self.num_windows,
                SOURCE_KEY: self.fingerprint}

    def load_state_dict(self, state: dict[str, int | str], origin: str = "sampler state") -> None:
        """Restore (seed, epoch, position); refuse a state saved for other data or another rank/world/shape.

        `origin`: where the state was read from (e.g. a checkpoint's train-rank-R.json), named in errors.
        """
        missing = [k for k in (*STATE_KEYS, SOURCE_KEY) if k not in state]
        if missing:
            raise DataError(f"{origin}: sampler state keys: found {sorted(state)}, expected also {missing}")
        bad_type = [k for k in STATE_KEYS if not isinstance(state[k], (int, np.integer)) or isinstance(state[k], bool)]
        if bad_type:
            raise DataError(f"{origin}: sampler state key '{bad_type[0]}': found {state[bad_type[0]]!r}, expected an integer")
        mine_data = (self.fingerprint, int(self.source.num_tokens), self.num_windows)
        saved_data = (state[SOURCE_KEY], state["num_tokens"], state["num_windows"])
        if saved_data != mine_data:
            raise DataError(
                f"{origin}: data position saved for other data: found fingerprint {str(saved_data[0])[:16]}, "
                f"{saved_data[1]} tokens, {saved_data[2]} windows; expected fingerprint {mine_data[0][:16]}, "
                f"{mine_data[1]} tokens, {mine_data[2]} windows ({self.source.path}): resume on the data it was saved from")
        mine = self.state_dict()
        for k in ("rank", "world_size", "seq_len", "batch_size"):
            if int(state[k]) != mine[k]:
                raise DataError(f"{origin} (rank {self.rank}): {k}: found {int(state[k])} in the saved state, "
                                f"expected {mine[k]} (this sampler)")
        epoch, position, seed = int(state["epoch"]), int(state["position"]), int(state["seed"])
        if seed < 0 or epoch < 0 or not 0 <= position <= self.batches_per_epoch:
            raise DataError(f"{origin} (rank {self.rank}): found seed={seed}, epoch={epoch}, position={position}, "
                            f"expected seed>=0, epoch>=0, 0<=position<={self.batches_per_epoch} (batches per epoch)")
        self.seed, self.epoch, self.position = seed, epoch, position
        self._perm_epoch = -1  # the seed may have changed
