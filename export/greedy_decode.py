"""Greedy decoding of an exported Seq2SeqTransformer with numpy + onnxruntime (no torch).

Two ways to run the same loop: the split graphs (encoder.onnx once, then decoder.onnx per step,
the memory reused) or the monolithic model.onnx (the whole model per step). Both follow
`Seq2SeqTransformer.greedy_decode` exactly: start from bos_id, append the argmax of the last
position, emit the pad id once a row has produced eos_id, stop when every row has finished or
max_len tokens exist.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from tfm_cls.runtime.metadata import FIELD_KEYS


def _session(path: str | Path, providers: list | None) -> ort.InferenceSession:
    if not Path(path).is_file():
        raise FileNotFoundError(f"ONNX file not found: {path}")
    return ort.InferenceSession(str(path), providers=providers or ["CPUExecutionProvider"])


def _pad_id(session: ort.InferenceSession, eos_id: int) -> int:
    meta = session.get_modelmeta().custom_metadata_map
    pad = json.loads(meta.get(FIELD_KEYS["model_config"], "{}")).get("pad_token_id")
    return eos_id if pad is None else int(pad)


def greedy_loop(
    last_logits: Callable[[np.ndarray], np.ndarray], batch: int, max_len: int, bos_id: int, eos_id: int, pad_id: int
) -> np.ndarray:
    """The decoding loop; `last_logits(out [B, t]) -> [B, V]` scores the next token of each row."""
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    out = np.full((batch, 1), bos_id, dtype=np.int64)  # [B, 1]
    finished = np.zeros(batch, dtype=bool)
    for _ in range(max_len - 1):
        next_ids = np.where(finished, pad_id, last_logits(out).argmax(axis=-1)).astype(np.int64)  # [B]
        out = np.concatenate([out, next_ids[:, None]], axis=1)
        finished |= next_ids == eos_id
        if finished.all():
            break
    return out


class SplitGreedyDecoder:
    """encoder.onnx + decoder.onnx: the source is encoded once, the decoder runs once per step."""

    def __init__(self, encoder_path: str | Path, decoder_path: str | Path, providers: list | None = None):
        self.encoder = _session(encoder_path, providers)
        self.decoder = _session(decoder_path, providers)

    def greedy_decode(
        self, src_ids: np.ndarray, src_attention_mask: np.ndarray, max_len: int, bos_id: int, eos_id: int
    ) -> np.ndarray:
        """src_ids, src_attention_mask [B, S] int64 -> tokens [B, <= max_len] int64."""
        (memory,) = self.encoder.run(None, {"src_ids": src_ids, "src_attention_mask": src_attention_mask})  # [B, S, D]

        def last_logits(out: np.ndarray) -> np.ndarray:
            feeds = {
                "tgt_ids": out,
                "memory": memory,
                "tgt_attention_mask": np.ones_like(out),
                "memory_attention_mask": src_attention_mask,
            }
            return self.decoder.run(None, feeds)[0][:, -1]  # [B, V]

        return greedy_loop(last_logits, len(src_ids), max_len, bos_id, eos_id, _pad_id(self.decoder, eos_id))


class MonolithicGreedyDecoder:
    """model.onnx: the whole encoder-decoder runs at every step (simpler, slower)."""

    def __init__(self, model_path: str | Path, providers: list | None = None):
        self.model = _session(model_path, providers)

    def greedy_decode(
        self, src_ids: np.ndarray, src_attention_mask: np.ndarray, max_len: int, bos_id: int, eos_id: int
    ) -> np.ndarray:
        def last_logits(out: np.ndarray) -> np.ndarray:
            feeds = {
                "src_ids": src_ids,
                "tgt_ids": out,
                "src_attention_mask": src_attention_mask,
                "tgt_attention_mask": np.ones_like(out),
            }
            return self.model.run(None, feeds)[0][:, -1]  # [B, V]

        return greedy_loop(last_logits, len(src_ids), max_len, bos_id, eos_id, _pad_id(self.model, eos_id))
