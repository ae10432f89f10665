"""Length-sorted batches under a token budget, and padding them into the model's inputs."""

from __future__ import annotations

import numpy as np

BATCHINGS = ("tokens", "fixed")
DEFAULT_MAX_TOKENS = 1024  # benchmarks/bench_infer.py --batching-only: best or tied on sst2, 1 and 2 threads


def plan_batches(lengths: list[int], batching: str = "tokens", batch_size: int = 32,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> list[list[int]]:
    """Row indices grouped into batches, sorted by length (stable) so that little padding is needed.
    `fixed`: `batch_size` rows each. `tokens`: as many rows as fit rows x longest <= max_tokens
    (padded tokens; a row longer than max_tokens is a batch alone), so short texts come in big
    batches and long ones in small."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    if batching == "fixed":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pad_batch(ids: list[list[int]], rows: list[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """input_ids and attention_mask [len(rows), longest] (int64) of the chosen rows."""
    width = max(len(ids[i]) for i in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)  # [batch, seq]
    attention_mask = np.zeros((len(rows), width), dtype=np.int64)  # [batch, seq], 1 = token
    for r, i in enumerate(rows):
        input_ids[r, : len(ids[i])] = ids[i]
        attention_mask[r, : len(ids[i])] = 1
    return input_ids, attention_mask


def pad_types(types: list[list[int]] | None, rows: list[int], width: int) -> np.ndarray:
    """token_type_ids [len(rows), width] (int64) of the chosen rows; 0 under padding, and
    everywhere when `types` is None."""
    token_type_ids = np.zeros((len(rows), width), dtype=np.int64)  # [batch, seq]
    if types is not None:
        for r, i in enumerate(rows):
            token_type_ids[r, : len(types[i])] = types[i]
    return token_type_ids
