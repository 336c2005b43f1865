"""A deterministic sample corpus in Megatron format, so the default run needs no data.

Each document is a walk of a fixed sparse Markov chain over token ids
[1, vocab_size): from token t the next token is one of 4 successors of t
(probabilities 0.7/0.15/0.1/0.05), or with probability 0.05 a uniform random
token.  Documents start with token 0 (BOS) and are 64..511 tokens long.  The
chain's low entropy (~1.4 nats/token vs ln(512) = 6.2 for uniform) gives a
model something to learn, so a falling loss is visible in 100 steps.
Everything comes from `numpy.random.Generator(PCG64(seed))`: same arguments,
same bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainready.data.megatron import write_indexed_dataset

SUCCESSORS = 4
SUCCESSOR_P = np.array([0.7, 0.15, 0.1, 0.05])  # then scaled by 1 - NOISE_P
NOISE_P = 0.05
MIN_LEN, MAX_LEN = 64, 512  # tokens per document, [MIN_LEN, MAX_LEN)
BOS = 0


def sample_documents(vocab_size: int = 512, num_docs: int = 400, seed: int = 1234) -> list[np.ndarray]:
    if vocab_size < 2 or num_docs < 1:
        raise ValueError(f"sample corpus: need vocab_size >= 2 and num_docs >= 1, got {vocab_size}, {num_docs}")
    rng = np.random.Generator(np.random.PCG64(seed))
    succ = rng.integers(1, vocab_size, size=(vocab_size, SUCCESSORS))  # [V, 4] successor ids
    lengths = rng.integers(MIN_LEN, MAX_LEN, size=num_docs)
    docs: list[np.ndarray] = []
    for n in lengths:
        n = int(n)
        choice = rng.choice(SUCCESSORS, size=n, p=SUCCESSOR_P)  # which successor at each step
        noise = rng.random(n) < NOISE_P
        rand_tok = rng.integers(1, vocab_size, size=n)
        doc = np.empty(n, dtype=np.int64)
        doc[0] = BOS
        t = int(rng.integers(1, vocab_size))
        for i in range(1, n):
            doc[i] = t
            t = int(rand_tok[i]) if noise[i] else int(succ[t, choice[i]])
        docs.append(doc)
    return docs


def write_sample_corpus(directory: str | Path, vocab_size: int = 512, num_docs: int = 400, seed: int = 1234,
                        name: str = "sample") -> Path:
    """Write DIR/NAME.bin + DIR/NAME.idx (each atomically); return the prefix DIR/NAME.

    uint16 tokens when vocab_size <= 65535, else int32 (Megatron's own rule for choosing the dtype).
    """
    dtype = np.uint16 if vocab_size <= 65535 else np.int32
    docs = sample_documents(vocab_size, num_docs, seed)
    return write_indexed_dataset(Path(directory) / name, docs, dtype)
