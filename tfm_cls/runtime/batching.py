"""Length-sorted token-budget batches, and padding them into the model's inputs."""

from __future__ import annotations

import itertools

import numpy as np

BATCHINGS = ("tokens", "fixed")
DEFAULT_MAX_TOKENS = 1024  # PyTorch (tfm-cls predict): python -m benchmarks.batching, best or tied on sst2
# onnxruntime, one thread (tfm-cls infer / serve): a session run of 16 rows x 16 tokens costs 3-8 % less per token
# than one of 64 x 16 (cache), and a run costs about as much as 16 more tokens, whatever the model
# (python -m benchmarks.hand_loop, docs/serving.md "Offline").
RUNTIME_MAX_TOKENS = 256
RUNTIME_RUN_COST = 16


def plan_batches(lengths: list[int], batching: str = "tokens", batch_size: int = 32,
                 max_tokens: int = DEFAULT_MAX_TOKENS, run_cost: int = 0) -> list[list[int]]:
    """Row indices grouped into batches, sorted by length (stable) so that little padding is needed.
    `fixed`: `batch_size` rows each. `tokens`: as many rows as fit rows x longest <= max_tokens
    (padded tokens; a row longer than max_tokens is a batch alone), so short texts come in big
    batches and long ones in small. `run_cost` (tokens; `tokens` only) bounds the padding: a row
    also starts a new batch when the padding it adds to the rows already in the batch (their count
    x its extra length) is more than `run_cost`, the cost of one more session run in tokens."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    if batching == "fixed":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        n = lengths[i]
        if current and ((len(current) + 1) * n > max_tokens or (run_cost and len(current) * (n - longest) > run_cost)):
            batches.append(current)
            current = []
        current.append(i)
        longest = n
    if current:
        batches.append(current)
    return batches


def pad_batch(ids: list[list[int]], rows: list[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """input_ids and attention_mask [len(rows), longest] (int64) of the chosen rows."""
    lengths = np.array([len(ids[i]) for i in rows], dtype=np.int64)  # [batch]
    is_token = np.arange(int(lengths.max())) < lengths[:, None]  # [batch, seq]
    input_ids = np.full(is_token.shape, pad_id, dtype=np.int64)  # [batch, seq]
    input_ids[is_token] = list(itertools.chain.from_iterable(ids[i] for i in rows))  # row-major: rows in order
    return input_ids, is_token.astype(np.int64)  # attention_mask: 1 = token


def pad_types(types: list[list[int]] | None, rows: list[int], width: int) -> np.ndarray:
    """token_type_ids [len(rows), width] (int64) of the chosen rows; 0 under padding, and
    everywhere when `types` is None."""
    token_type_ids = np.zeros((len(rows), width), dtype=np.int64)  # [batch, seq]
    if types is not None:
        for r, i in enumerate(rows):
            token_type_ids[r, : len(types[i])] = types[i]
    return token_type_ids
