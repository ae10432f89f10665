"""An exported tfm_cls classifier run by onnxruntime: one .onnx file is the whole model (the
tokenizer, the labels, the long-text policy and the decision rule travel in its metadata)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.batching import (
    BATCHINGS,
    RUNTIME_MAX_TOKENS,
    RUNTIME_RUN_COST,
    pad_batch,
    pad_types,
    plan_batches,
)
from tfm_cls.runtime.heads import ONNX_TASKS, SingleLabel, runtime_head
from tfm_cls.runtime.metadata import ExportMetadata, read_props, stale_export_problem
from tfm_cls.runtime.text import LongText, TextEncoder, aggregate_windows, encode_pairs


def _ort():
    """onnxruntime, imported on first use: the text layer is imported by training code without it."""
    import onnxruntime

    return onnxruntime


def make_session(model_path: str, providers: list[str] | None = None, threads: int = 0) -> Any:
    """An onnxruntime session on `model_path`, with clear errors for a missing or unreadable file."""
    ort = _ort()
    if not os.path.isfile(model_path):
        raise InferenceError(f"model file not found: {model_path}")
    providers = providers or ["CPUExecutionProvider"]
    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing:
        raise InferenceError(f"execution provider(s) {missing} not available here; available: {available}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1  # one graph, run op after op: extra pools only contend
    try:
        return ort.InferenceSession(model_path, sess_options=options, providers=providers)
    except Exception as err:  # onnxruntime raises its own exception types for unreadable files
        raise InferenceError(f"{model_path} is not a readable ONNX model: {err}") from None


def classifier_metadata(session: Any, model_path: str) -> ExportMetadata:
    """The metadata of a classifier export, checked against its graph: a file that is not ours, is
    not a classifier, lacks a key, or whose labels / inputs do not fit its outputs is refused."""
    meta = ExportMetadata.from_props(read_props(session), model_path)
    if meta.spec_task not in ONNX_TASKS:
        raise InferenceError(f"{model_path} is a tfm_cls {meta.task!r} model; this runs {sorted(ONNX_TASKS)} models")
    meta.require_classifier(model_path)
    head = runtime_head(meta)
    inputs = [i.name for i in session.get_inputs()]
    wanted = ["input_ids", "attention_mask", *(["token_type_ids"] if meta.pair else [])]
    outputs = {o.name: o.shape for o in session.get_outputs()}
    problems = []
    if inputs != wanted:
        problems.append(f"its graph takes inputs {inputs}, its metadata says {wanted}")
    # A graph without its head's probabilities gets them from its logits (Classifier.run).
    for name in ("logits", *(["value"] if head.score_output == "value" else [])):
        if name not in outputs:
            problems.append(f"its graph has no {name!r} output (outputs: {sorted(outputs)})")
    width = (outputs.get("logits") or [None, None])[-1]
    expected = head.num_outputs(len(meta.labels))
    if isinstance(width, int) and width != expected:
        problems.append(f"its graph has {width} outputs but its metadata lists {len(meta.labels)} labels "
                        f"(a {head.task} model needs {expected})")
    if problems:
        raise InferenceError(f"{model_path}: the metadata does not fit the graph: {'; '.join(problems)}; re-export it")
    return meta


@dataclasses.dataclass
class Inputs:
    """Encoded texts: `ids` (and `types` for pairs) hold the model rows, windows[i] of them for
    text i (one unless chunking), in text order; `truncated[i]`: text i was cut."""

    ids: list[list[int]]
    types: list[list[int]] | None
    truncated: list[bool]
    windows: list[int]

    @property
    def lengths(self) -> list[int]:
        """Tokens of each model row."""
        return [len(x) for x in self.ids]

    @classmethod
    def concat(cls, parts: list[Inputs]) -> Inputs:
        """One Inputs of several, their texts in order (a micro-batch of requests)."""
        pairs = bool(parts) and parts[0].types is not None
        return cls([r for p in parts for r in p.ids], [r for p in parts for r in p.types] if pairs else None,
                   [t for p in parts for t in p.truncated], [w for p in parts for w in p.windows])


class Classifier:
    """A tfm_cls text classifier export: tokenizer, labels, long-text policy, head and ONNX session
    from one file. `long_text` overrides fields of the policy the export carries; `batching` /
    `batch_size` / `max_tokens` / `run_cost` say how rows are grouped (plan_batches)."""

    def __init__(
        self,
        model_path: str,
        providers: list[str] | None = None,
        threads: int = 0,
        max_length: int | None = None,
        long_text: dict[str, Any] | None = None,
        batching: str = "tokens",
        batch_size: int = 32,
        max_tokens: int = RUNTIME_MAX_TOKENS,
        run_cost: int = RUNTIME_RUN_COST,
    ):
        self.session = make_session(model_path, providers, threads)
        self.metadata = meta = classifier_metadata(self.session, model_path)
        stale = stale_export_problem(meta, model_path)
        if stale:
            raise InferenceError(stale)
        self.labels: list[str] = meta.labels
        self.model_max_length = meta.max_length
        self.pad_id = int(meta.model_config["pad_token_id"])
        try:
            self.tokenizer = Tokenizer.from_str(meta.tokenizer)
        except Exception as err:  # a tokenizer that does not parse
            raise InferenceError(f"{model_path}: unreadable tfm_cls metadata ({err}); re-export it") from None
        saved = meta.long_text or LongText()
        # [CLS] and [SEP] are added after truncation: a limit must leave room for one real token.
        shortest = self.tokenizer.num_special_tokens_to_add(False) + 1
        if max_length is not None and not shortest <= max_length <= self.model_max_length:
            raise InferenceError(
                f"--max-length must be in [{shortest}, {self.model_max_length}] for {model_path} "
                f"({shortest - 1} special tokens plus at least one text token), got {max_length}"
            )
        if batching not in BATCHINGS or batch_size < 1 or max_tokens < 1 or run_cost < 0:
            raise InferenceError(
                f"batching must be one of {list(BATCHINGS)} with a positive batch size and token budget and a "
                f"run cost >= 0, got {batching!r}, {batch_size}, {max_tokens}, {run_cost}"
            )
        self.max_length = max_length or self.model_max_length
        self.tokenizer.no_padding()  # batches are padded here, to their own longest row
        # A pair is truncated by shortening its longer text first.
        self.tokenizer.enable_truncation(self.max_length, strategy="longest_first")
        self.policy = LongText(**{**saved.__dict__, **{k: v for k, v in (long_text or {}).items() if v is not None}})
        self.encoder = TextEncoder(self.tokenizer, self.max_length, self.policy)
        self.batching, self.batch_size, self.max_tokens, self.run_cost = batching, batch_size, max_tokens, run_cost
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.head: SingleLabel = runtime_head(meta)
        self.pair = meta.pair
        # The long-text policy cuts and windows single texts; a pair is truncated longer text first,
        # and windows are aggregated for single-label models only (docs/long-documents.md).
        if self.pair and self.policy != LongText():
            raise InferenceError(f"{model_path} classifies sentence pairs, truncated longer text first: "
                                 "--truncation / --chunk apply to single texts")
        if self.policy.chunk and not self.head.chunkable:
            raise InferenceError(f"{model_path} is a {self.head.task} model: --chunk applies to single-label models")

    @property
    def thresholds(self) -> np.ndarray:
        """Multi-label: the decision threshold of each label."""
        return self.head.current_thresholds(len(self.labels))

    def encode(self, texts: list[str]) -> tuple[list[list[int]], list[bool]]:
        """Token ids of each model row (one per text, or its windows under chunking) and whether
        each text was truncated; `encoder.encode` also gives the windows per text."""
        encoded = self.encoder.encode(texts)
        return encoded.ids, encoded.truncated

    def encode_with_types(
        self, texts: list[str], pairs: list[str] | None = None
    ) -> tuple[list[list[int]], list[list[int]], list[bool]]:
        """Token ids and token types of each text (the rows of `encode`, types all 0) or pair
        (truncated to max_length, its longer side first), and whether it was truncated."""
        if pairs is None:
            ids, truncated = self.encode(texts)
            return ids, [[0] * len(x) for x in ids], truncated
        return encode_pairs(self.tokenizer, texts, pairs)

    def feeds(
        self, ids: list[list[int]], rows: list[int] | None = None, types: list[list[int]] | None = None
    ) -> dict[str, np.ndarray]:
        """The session's inputs for `rows` of `ids` (all rows: None), padded to their longest;
        token_type_ids (from `types`, else zeros) where the model reads pairs."""
        rows = list(range(len(ids))) if rows is None else rows
        input_ids, attention_mask = pad_batch(ids, rows, self.pad_id)  # [batch, seq]
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.pair:
            feeds["token_type_ids"] = pad_types(types, rows, input_ids.shape[1])  # [batch, seq]
        return feeds

    def run(self, ids: list[list[int]], types: list[list[int]] | None = None) -> np.ndarray:
        """Scores for one batch of token id lists, padded here: probabilities [batch, num_classes]
        (softmax, or per-label sigmoid for multi-label), or values [batch] (regression)."""
        feeds = self.feeds(ids, None, types)
        if self.head.score_output in self.output_names:
            return self.session.run([self.head.score_output], feeds)[0]
        return self.head.scores(self.session.run(["logits"], feeds)[0])  # [batch, num_classes]

    def encode_inputs(
        self, texts: list[str], pairs: list[str] | None = None, encoder: TextEncoder | None = None,
        pair_tokenizer: Tokenizer | None = None,
    ) -> Inputs:
        """The model rows of `texts` (sentence pairs with `pairs`): what `score` runs. `encoder` /
        `pair_tokenizer` replace the classifier's own (another truncation side, tfm-cls serve)."""
        if self.pair and pairs is None:
            raise InferenceError("this model classifies sentence pairs: give each text its second text")
        if self.pair:
            ids, types, truncated = encode_pairs(pair_tokenizer or self.tokenizer, texts, pairs)
            return Inputs(ids, types, truncated, [1] * len(texts))
        enc = (encoder or self.encoder).encode(texts)
        return Inputs(enc.ids, None, enc.truncated, enc.windows)

    def score(self, inputs: Inputs, batch_size: int | None = None) -> np.ndarray:
        """Scores of encoded texts in their order ([texts, num_classes]; regression [texts]). Rows
        are batched by length (plan_batches); with `batch_size`, in fixed batches of that size."""
        ids, types, windows = inputs.ids, inputs.types, inputs.windows
        lengths = [len(x) for x in ids]
        batching = "fixed" if batch_size else self.batching
        batches = plan_batches(lengths, batching, batch_size or self.batch_size, self.max_tokens, self.run_cost)
        num_classes = len(self.labels)
        if not self.policy.chunk:
            width = (self.head.num_outputs(num_classes),) if self.head.score_output != "value" else ()
            probs = np.empty((len(windows), *width), dtype=np.float32)
            for rows in batches:
                probs[rows] = self.run([ids[i] for i in rows], None if types is None else [types[i] for i in rows])
            return probs
        # chunking: single-label models on single texts only (checked in __init__)
        logits = np.empty((len(ids), num_classes), dtype=np.float32)  # [windows, C]
        for rows in batches:
            logits[rows] = self.session.run(["logits"], self.feeds(ids, rows))[0]
        texts_logits = aggregate_windows(logits, windows, self.policy.aggregate, self.policy.scores)
        return self.head.scores(texts_logits).astype(np.float32)

    def classify(
        self, texts: list[str], batch_size: int | None = None, pairs: list[str] | None = None
    ) -> tuple[np.ndarray, list[bool], list[int]]:
        """Scores in input order ([len(texts), num_classes]; regression [len(texts)]), whether each
        text was truncated, and its number of windows (encode_inputs, then score). A sentence-pair
        model needs `pairs`, each text's second text."""
        inputs = self.encode_inputs(texts, pairs)
        return self.score(inputs, batch_size), inputs.truncated, inputs.windows

    def predict_proba(
        self, texts: list[str], batch_size: int | None = None, pairs: list[str] | None = None
    ) -> tuple[np.ndarray, list[bool]]:
        """Scores in input order ([len(texts), num_classes]; regression [len(texts)]) and whether
        each text was truncated."""
        probs, truncated, _ = self.classify(texts, batch_size, pairs)
        return probs, truncated

    def decide(self, probs: np.ndarray) -> np.ndarray | None:
        """The head's per-label decisions [N, C] (multi-label: bool, probability >= the label's
        threshold, a row with none over its threshold gets its most probable label unless the
        export says otherwise); None for single-label (argmax) and regression."""
        return self.head.decide(probs)
