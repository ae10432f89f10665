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
import time
from typing import Any

import numpy as np
import torch
from datasets import Dataset, DatasetDict, Sequence, Value
from tokenizers import Tokenizer

from tfm_cls.data.ragged import RaggedIds
from tfm_cls.data.tokenizer import max_length_of, text_encoder
from tfm_cls.errors import ConfigError
from tfm_cls.runtime.text import LongText, TextEncoder

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


@functools.lru_cache(maxsize=4)
def _encoder_from_json(tokenizer_json: str, policy_json: str) -> TextEncoder:
    tokenizer = Tokenizer.from_str(tokenizer_json)
    return text_encoder(tokenizer, LongText.from_json(policy_json), max_length_of(tokenizer))


def _encode_batch_long(batch: dict[str, list[Any]], tokenizer_json: str, policy_json: str) -> dict[str, list[Any]]:
    """As `_encode_batch` under a LongText policy: each example's rows (one, or its windows)."""
    encoded = _encoder_from_json(tokenizer_json, policy_json).encode(batch["text"])
    rows = iter(encoded.ids)
    windows = [[next(rows) for _ in range(n)] for n in encoded.windows]
    return {
        "input_ids": windows,
        "length": [[len(w) for w in ws] for ws in windows],
        "truncated": encoded.truncated,
        "empty": [not text.strip() for text in batch["text"]],
    }


@dataclasses.dataclass
class TokenizedSplit:
    """One split in memory: token ids per row, labels per example and lengths per row (numpy).
    A row is an example, or with chunked inference one window of an example: `windows[i]` rows
    belong to example i, after those of example i - 1 (None: one row each)."""

    input_ids: RaggedIds | list[list[int]]
    """Each row's ids: RaggedIds from the tokenizer (flat arrays, tfm_cls.data.ragged), or lists where
    built by hand; both index as ids[i]."""
    labels: np.ndarray
    lengths: np.ndarray
    num_truncated: int
    num_empty: int
    token_type_ids: RaggedIds | list[list[int]] | None = None
    """Sentence pairs: 0 for the first text's tokens (and [CLS]), 1 for the second's; None for single texts."""
    windows: np.ndarray | None = None
    policy: LongText | None = None
    """How the windows' logits are aggregated (LongText.aggregate / .scores)."""

    def __len__(self) -> int:
        """Number of examples."""
        return len(self.labels)

    @property
    def num_rows(self) -> int:
        return len(self.input_ids)

    def row_labels(self, rows: list[int]) -> np.ndarray:
        """The labels of rows (a window has its example's label)."""
        if self.windows is None:
            return self.labels[rows]
        return np.repeat(self.labels, self.windows, axis=0)[rows]


def _labels(mapped: Dataset) -> np.ndarray:
    """The split's targets: class ids [N] (int64), or float targets (multi-label multi-hot [N, C],
    regression values [N]); zeros where the split has no labels."""
    if "label" not in mapped.column_names:
        return np.zeros(len(mapped), np.int64)
    dtype = np.float32 if _float_target(mapped.features["label"]) else np.int64
    return np.asarray(mapped["label"], dtype=dtype)


TOKENIZE_BLOCK = 200_000
"""A split of more rows is tokenized this many at a time, with a log line after each (rows done, time left):
a million short texts take about two minutes, which datasets' own bar shows on a terminal only."""


def _mapped(ds: Dataset, encode: Any, fn_kwargs: dict[str, Any], remove: list[str], desc: str) -> Dataset:
    """`ds` mapped by `encode` (batched, each batch of 1,000 rows), in blocks of TOKENIZE_BLOCK rows past that
    many, joined (Arrow tables end to end: no copy)."""
    from datasets import concatenate_datasets

    def run(part: Dataset) -> Dataset:
        return part.map(encode, batched=True, batch_size=1000, fn_kwargs=fn_kwargs, remove_columns=remove, desc=desc)

    rows = len(ds)
    if rows <= TOKENIZE_BLOCK:
        return run(ds)
    started, parts = time.monotonic(), []
    for first in range(0, rows, TOKENIZE_BLOCK):
        end = min(rows, first + TOKENIZE_BLOCK)
        parts.append(run(ds.select(range(first, end))))
        took = time.monotonic() - started
        logger.info("%s: %d of %d rows (%.0f%%) in %.0f s, ~%.0f s left", desc, end, rows, 100 * end / rows, took,
                    took * (rows - end) / end)
    return concatenate_datasets(parts)


def tokenize_dataset(
    ds: Dataset, tokenizer: Tokenizer, desc: str = "tokenize", policy: LongText | None = None
) -> TokenizedSplit:
    """Tokenize a dataset with a `text` column (and optional `label`) through `Dataset.map`. A
    `policy` other than plain head truncation (LongText()) cuts long texts by its strategy, or
    (`chunk`) splits them into windows, one row each (TokenizedSplit.windows). Sentence pairs (a
    `text_pair` column) are truncated by the tokenizer, longer text first; they take no policy."""
    pairs = "text_pair" in ds.column_names
    plain = policy is None or policy == LongText()
    if pairs and not plain:
        raise ConfigError(
            "tokenizer.truncation / chunk apply to single texts; sentence pairs are truncated longer text first"
        )
    if not plain:
        return _tokenize_long(ds, tokenizer, desc, policy)
    if pairs:
        tokenizer = pair_truncation(tokenizer)
    mapped = _mapped(ds, _encode_batch, {"tokenizer_json": tokenizer.to_str()},
                     ["text", "text_pair"] if pairs else ["text"], desc)
    labels = _labels(mapped)
    columns = mapped.with_format("arrow")  # whole columns as Arrow arrays: no Python object a row
    return TokenizedSplit(
        input_ids=RaggedIds.from_arrow(columns["input_ids"]), labels=labels,
        lengths=_numpy(columns["length"]).astype(np.int64), num_truncated=int(_numpy(columns["truncated"]).sum()),
        num_empty=int(_numpy(columns["empty"]).sum()),
        token_type_ids=RaggedIds.from_arrow(columns["token_type_ids"]) if pairs else None,
    )


def _numpy(column: Any) -> np.ndarray:
    """An Arrow column of scalars as a numpy array."""
    return column.to_numpy() if hasattr(column, "to_numpy") else np.asarray(column)


def _tokenize_long(ds: Dataset, tokenizer: Tokenizer, desc: str, policy: LongText) -> TokenizedSplit:
    text_encoder(tokenizer, policy)  # a policy that cannot work fails here, not in a map worker
    mapped = _mapped(ds, _encode_batch_long, {"tokenizer_json": tokenizer.to_str(), "policy_json": policy.to_json()},
                     ["text"], desc)
    import pyarrow.compute as pc

    labels = _labels(mapped)
    columns = mapped.with_format("arrow")  # example -> its windows -> their ids, flattened one level
    windows = _numpy(pc.list_value_length(columns["input_ids"])).astype(np.int64)
    return TokenizedSplit(
        input_ids=RaggedIds.from_arrow(pc.list_flatten(columns["input_ids"])), labels=labels,
        lengths=_numpy(pc.list_flatten(columns["length"])).astype(np.int64),
        num_truncated=int(_numpy(columns["truncated"]).sum()), num_empty=int(_numpy(columns["empty"]).sum()),
        windows=windows if policy.chunk else None, policy=policy,
    )


def tokenize_splits(
    splits: DatasetDict, tokenizer: Tokenizer, policy: LongText | None = None, train_windows: bool = False
) -> dict[str, TokenizedSplit]:
    """Every split tokenized; under a chunking `policy` the training split is truncated by its
    strategy (one row per example) and the evaluation splits are windowed. `train_windows`: the
    training split is windowed too (the policy's stride), for training on one random window of
    each text per epoch (`window_rows`)."""
    if train_windows:
        train_policy = dataclasses.replace(policy or LongText(), chunk=True)
    else:
        train_policy = dataclasses.replace(policy, chunk=False) if policy is not None else None
    out = {
        name: tokenize_dataset(ds, tokenizer, f"tokenize {name}", train_policy if name == "train" else policy)
        for name, ds in splits.items()
    }
    for name, split in out.items():
        if split.num_truncated or split.num_empty:
            logger.info(
                "%s: %d of %d texts truncated to the max length, %d empty or whitespace-only",
                name, split.num_truncated, len(split), split.num_empty,
            )
        if split.windows is not None and split.num_rows > len(split):
            logger.info("%s: %d texts as %d windows (chunked inference)", name, len(split), split.num_rows)
    return out


def first_windows(split: TokenizedSplit) -> TokenizedSplit:
    """The split with one row per example, each example's first window (what truncating at the head
    keeps); the split itself where it is not windowed."""
    if split.windows is None:
        return split
    first = first_rows(split.windows)
    return dataclasses.replace(
        split, input_ids=take_rows(split.input_ids, first), lengths=split.lengths[first], windows=None,
        token_type_ids=None if split.token_type_ids is None else take_rows(split.token_type_ids, first),
    )


def take_examples(split: TokenizedSplit, examples: np.ndarray) -> TokenizedSplit:
    """The split with only these examples ([k] indices, in order), each with all its rows (windows)."""
    rows = examples
    if split.windows is not None:
        counts = np.asarray(split.windows, dtype=np.int64)[examples]
        starts = first_rows(split.windows)[examples]
        rows = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
    return dataclasses.replace(
        split, input_ids=take_rows(split.input_ids, rows), labels=split.labels[examples], lengths=split.lengths[rows],
        windows=None if split.windows is None else np.asarray(split.windows)[examples],
        token_type_ids=None if split.token_type_ids is None else take_rows(split.token_type_ids, rows),
    )


def take_rows(ids: RaggedIds | list[list[int]], rows: np.ndarray) -> RaggedIds | list[list[int]]:
    """These rows of a split's ids, of the same kind."""
    return ids.take(rows) if isinstance(ids, RaggedIds) else [ids[i] for i in rows]


def first_rows(windows: np.ndarray) -> np.ndarray:
    """[N] int64: each example's first row in a windowed split (example i has windows[i] rows, after
    those of example i - 1)."""
    return np.concatenate([[0], np.cumsum(np.asarray(windows, dtype=np.int64))[:-1]]).astype(np.int64)


# ---- batching -------------------------------------------------------------------------------------------


def window_rows(windows: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """One row per example of a windowed split (TokenizedSplit.windows: example i has windows[i]
    rows, after those of example i - 1): a window drawn uniformly at random, the same for the same
    (seed, epoch) in every process. [num_examples] row indices, in example order."""
    windows = np.asarray(windows, dtype=np.int64)
    first = first_rows(windows)  # [N]
    rng = np.random.default_rng([seed, epoch, 0x77696E])  # its own stream: the sampler's is [seed, epoch]
    return first + (rng.random(len(windows)) * windows).astype(np.int64)


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
    ids, mask = _padded(split.input_ids, indices, pad_id)  # [batch, seq] each
    labels = torch.from_numpy(split.row_labels(indices))  # [batch] (multi-label: [batch, num_labels])
    batch = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask.astype(np.int64)),
             "labels": labels}
    if split.token_type_ids is not None:
        types, _ = _padded(split.token_type_ids, indices, 0)  # [batch, seq], 0 under padding
        batch["token_type_ids"] = torch.from_numpy(types)
    return batch


def _padded(ids: RaggedIds | list[list[int]], indices: list[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """These rows padded (RaggedIds.padded); rows kept as lists are gathered first, only those."""
    if isinstance(ids, RaggedIds):
        return ids.padded(indices, pad_id)
    return RaggedIds.from_lists([ids[i] for i in indices]).padded(np.arange(len(indices)), pad_id)


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
