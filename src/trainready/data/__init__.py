"""Token data in real formats: Megatron-LM indexed datasets, flat nanoGPT token
files, and a deterministic resumable sampler.  See docs/data.md."""

from trainready.data.corpus import write_sample_corpus
from trainready.data.megatron import IndexedDataset, write_indexed_dataset
from trainready.data.sampler import SequenceSampler
from trainready.data.source import TokenSource, check_vocab, open_tokens

__all__ = ["IndexedDataset", "SequenceSampler", "TokenSource", "check_vocab", "open_tokens",
           "write_indexed_dataset", "write_sample_corpus"]
