"""Tokenized splits in memory and batches of similar length.

`tokenize_splits` runs the tokenizer through `Dataset.map(batched=True)` (cached on disk for file
sources). `LengthBucketSampler` yields batches of similar length for one (rank, world_size) shard
from a resumable position; `collate` pads them dynamically and builds the attention mask;
`batch_loader` serves collated batches (optionally from worker processes).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

import numpy as np
import torch
from datasets import Dataset, DatasetDict, Sequence, Value
from tokenizers import Tokenizer

logger = logging.getLogger(__name__)


# ---- tokenization --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _tokenizer_from_json(tokenizer_json: str) -> Tokenizer:
    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.no_padding()  # padding happens per batch in `collate`
    return tokenizer


def _encode_batch(batch: dict[str, list[Any]], tokenizer_json: str) -> dict[str, list[Any]]:
    tokenizer = _tokenizer_from_json(tokenizer_json)
    if "text_pair" in batch:  # the pair template, `[CLS] a [SEP] b [SEP]`, types 0 then 1
        encodings = tokenizer.encode_batch(list(zip(batch["text"], batch["text_pair"])))
        return {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "length": [len(e.ids) for e in encodings],
            "truncated": [bool(e.overflowing) for e in encodings],
            "empty": [not a.strip() or not b.strip() for a, b in zip(batch["text"], batch["text_pair"])],
        }
    encodings = tokenizer.encode_batch(batch["text"])
    return {
        "input_ids": [e.ids for e in encodings],
        "length": [len(e.ids) for e in encodings],
        "truncated": [bool(e.overflowing) for e in encodings],
        "empty": [not text.strip() for text in batch["text"]],
    }


def pair_truncation(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of `tokenizer` that truncates a pair by shortening the longer text first (the
    tokenizers library's `longest_first`), at the same maximum length."""
    out = Tokenizer.from_str(tokenizer.to_str())
    if out.truncation is not None:
        out.enable_truncation(max_length=out.truncation["max_length"], strategy="longest_first")
    return out


def _float_target(feature: Any) -> bool:
    """A multi-label (a sequence of 0/1) or regression (a float) label column."""
    if isinstance(feature, (Sequence, list)):
        return True
    return isinstance(feature, Value) and feature.dtype.startswith("float")


@dataclasses.dataclass
class TokenizedSplit:
    """One split in memory: token ids per example, labels and lengths (numpy)."""

    input_ids: list[list[int]]
    labels: np.ndarray
    lengths: np.ndarray
    num_truncated: int
    num_empty: int
    token_type_ids: list[list[int]] | None = None
    """Sentence pairs: 0 for the first text's tokens (and [CLS]), 1 for the second's; None for single texts."""

    def __len__(self) -> int:
        return len(self.input_ids)


def tokenize_dataset(ds: Dataset, tokenizer: Tokenizer, desc: str = "tokenize") -> TokenizedSplit:
    """Tokenize a dataset with a `text` column (and optional `label`) through `Dataset.map`."""
    pairs = "text_pair" in ds.column_names
    if pairs:
        tokenizer = pair_truncation(tokenizer)
    mapped = ds.map(
        _encode_batch, batched=True, batch_size=1000, fn_kwargs={"tokenizer_json": tokenizer.to_str()},
        remove_columns=["text", "text_pair"] if pairs else ["text"], desc=desc,
    )
    labels = np.asarray(mapped["label"], dtype=np.int64) if "label" in mapped.column_names else np.zeros(len(mapped), np.int64)
    if "label" in mapped.column_names and _float_target(mapped.features["label"]):
        # multi-label multi-hot [N, C] and regression values [N] are float targets
        labels = np.asarray(mapped["label"], dtype=np.float32)
    return TokenizedSplit(
        input_ids=mapped["input_ids"], labels=labels, lengths=np.asarray(mapped["length"], dtype=np.int64),
        num_truncated=int(sum(mapped["truncated"])), num_empty=int(sum(mapped["empty"])),
        token_type_ids=mapped["token_type_ids"] if pairs else None,
    )


def tokenize_splits(splits: DatasetDict, tokenizer: Tokenizer) -> dict[str, TokenizedSplit]:
    out = {name: tokenize_dataset(ds, tokenizer, f"tokenize {name}") for name, ds in splits.items()}
    for name, split in out.items():
        if split.num_truncated or split.num_empty:
            logger.info(
                "%s: %d of %d texts truncated to the max length, %d empty or whitespace-only",
                name, split.num_truncated, len(split), split.num_empty,
            )
    return out


# ---- batching -------------------------------------------------------------------------------------------


class LengthBucketSampler:
    """Batches of similar length for one shard (rank of world_size), deterministic per epoch.

    Batches are built globally, `batch_size * world_size` examples each, and each global batch is
    cut into world_size contiguous parts, part r for rank r. So N processes with batch b step
    through the very examples that 1 process with batch N*b does, in the same order; every
    example is seen exactly once per epoch and every rank runs the same number of steps.
    Training (shuffle=True): a seeded permutation per epoch, cut into windows of `bucket_batches`
    global batches, each window sorted by length and cut into batches, then the batch order
    shuffled. A last global batch too small to give every rank an example joins the one before.
    Evaluation (shuffle=False): sorted by length; a rank's part of the last batch may be empty.
    `epoch_batches(epoch)[position:]` resumes mid-epoch.
    """

    def __init__(
        self, lengths: np.ndarray, batch_size: int, *, shuffle: bool, seed: int = 0, bucket_batches: int = 50,
        rank: int = 0, world_size: int = 1,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world_size {world_size}")
        if shuffle and len(lengths) < world_size:
            raise ValueError(f"{len(lengths)} training examples cannot give each of {world_size} processes one")
        self.lengths = np.asarray(lengths)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.bucket_batches, self.rank, self.world_size = bucket_batches, rank, world_size

    def _global_batches(self, epoch: int) -> list[np.ndarray]:
        n, bs = len(self.lengths), self.batch_size * self.world_size
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            return [order[i : i + bs] for i in range(0, n, bs)]
        rng = np.random.default_rng([self.seed, epoch])
        perm = rng.permutation(n)
        window = bs * self.bucket_batches
        batches = []
        for start in range(0, n, window):
            chunk = perm[start : start + window]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches.extend(chunk[i : i + bs] for i in range(0, len(chunk), bs))
        if len(batches) > 1 and len(batches[-1]) < self.world_size:
            batches[-2:] = [np.concatenate(batches[-2:])]
        return [batches[i] for i in rng.permutation(len(batches))]

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches (lists of example indices) for `epoch`, in order."""
        return [np.array_split(b, self.world_size)[self.rank].tolist() for b in self._global_batches(epoch)]

    def __len__(self) -> int:
        return len(self.epoch_batches(0))


def collate(split: TokenizedSplit, indices: list[int], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Pad a batch to its longest example. attention_mask: 1 = token, 0 = padding."""
    seqs = [split.input_ids[i] for i in indices]
    width = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # [batch, seq]
    attention_mask = torch.zeros((len(seqs), width), dtype=torch.long)  # [batch, seq]
    for row, seq in enumerate(seqs):
        input_ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention_mask[row, : len(seq)] = 1
    labels = torch.from_numpy(split.labels[indices])  # [batch] (multi-label: [batch, num_labels])
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    if split.token_type_ids is not None:
        token_type_ids = torch.zeros((len(seqs), width), dtype=torch.long)  # [batch, seq], 0 under padding
        for row, i in enumerate(indices):
            types = split.token_type_ids[i]
            token_type_ids[row, : len(types)] = torch.tensor(types, dtype=torch.long)
        batch["token_type_ids"] = token_type_ids
    return batch


class _CollatedBatches(torch.utils.data.Dataset):
    """Item i is batch i, padded (DataLoader items are whole batches: the sampler grouped them)."""

    def __init__(self, split: TokenizedSplit, batches: list[list[int]], pad_id: int) -> None:
        self.split, self.batches, self.pad_id = split, batches, pad_id

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return collate(self.split, self.batches[i], self.pad_id)


def batch_loader(
    split: TokenizedSplit, batches: list[list[int]], pad_id: int, device: torch.device, num_workers: int = 0
) -> torch.utils.data.DataLoader:
    """The collated `batches`, in order. On CUDA they come in pinned memory, so `.to(device,
    non_blocking=True)` copies asynchronously; `num_workers` processes collate ahead."""
    return torch.utils.data.DataLoader(
        _CollatedBatches(split, batches, pad_id), batch_size=None, shuffle=False, num_workers=num_workers,
        pin_memory=device.type == "cuda",
        # Its own generator: a DataLoader draws a seed for its workers from the global RNG otherwise,
        # and a resumed run (which starts one loader more) would then get other dropout masks.
        generator=torch.Generator(),
    )
