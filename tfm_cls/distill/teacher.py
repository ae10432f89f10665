"""The teacher: a classification run directory (PyTorch) or one of our exported ONNX files.

`open_teacher(path)` checks what it can without running anything (that it is a classifier of
ours, its labels, the sha256 of its weights / ONNX file) and loads the model lazily, on the first
`logits` call, so bad input fails before any work is spent.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from tokenizers import Tokenizer

from tfm_cls import runs as R
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.data.tokenized import pair_truncation
from tfm_cls.errors import ConfigError, RunDirError, TeacherError
from tfm_cls.io import file_sha256  # the hash verify-onnx checks exports by
from tfm_cls.runtime.batching import pad_batch, pad_types

logger = logging.getLogger(__name__)

HEADS = ("single_label", "multi_label", "regression")


class Teacher(Protocol):
    path: Path
    kind: str
    """"run" (PyTorch run directory) or "onnx"."""
    head: str
    """One of HEADS: what its outputs mean (single_label: softmax logits; regression: one value)."""
    pair: bool
    """It reads sentence pairs (`[CLS] a [SEP] b [SEP]` with token types): `logits` needs `pairs`."""
    labels: list[str]
    sha256: str
    """Of the weights file (run) or the ONNX file: keys the cache of its outputs."""
    weights_file: Path

    def tokenizer(self) -> Tokenizer:
        """The teacher's tokenizer (its own truncation)."""

    def num_parameters(self) -> int: ...

    def token_embeddings(self) -> np.ndarray:
        """The input token-embedding matrix [vocab, d_teacher]."""

    def token_outputs(self, batch_size: int) -> np.ndarray:
        """[vocab, d_teacher]: the pooled vector the teacher's head reads for each vocabulary token
        alone, in its tokenizer's template (`[CLS] token [SEP]`): model2vec's static embeddings,
        taken from the fine-tuned teacher."""

    def logits(self, texts: list[str], batch_size: int, pairs: list[str] | None = None) -> np.ndarray:
        """Raw outputs [len(texts), num_outputs], in input order; a pair teacher reads (texts[i], pairs[i])."""

    def feature_width(self) -> int:
        """Width of the pooled vector its head reads (0: the teacher cannot give it, e.g. ONNX)."""

    def logits_and_features(self, texts: list[str], batch_size: int, pairs: list[str] | None = None) -> np.ndarray:
        """[len(texts), num_outputs + feature_width]: the logits, then the pooled vector."""

    def source_run(self, why: str) -> RunTeacher:
        """The run directory holding the teacher's weights (itself, or the run an ONNX file lies in);
        a TeacherError saying `why` they are needed where there is none."""


def _length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


def special_tokens_around(tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer's template puts before and after one text (BERT: [CLS] / [SEP])."""
    probe = "a"
    plain = tokenizer.encode(probe, add_special_tokens=False).ids
    full = tokenizer.encode(probe).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], full[start + len(plain) :]
    raise TeacherError("the teacher's tokenizer template does not keep the text's own tokens; cannot embed single tokens")


def _check_pairs(teacher: Teacher, texts: list[str], pairs: list[str] | None) -> None:
    if teacher.pair and (pairs is None or len(pairs) != len(texts)):
        raise TeacherError(f"the teacher {teacher.path} reads sentence pairs: give each text its second text")
    if not teacher.pair and pairs is not None:
        raise TeacherError(f"the teacher {teacher.path} reads single texts, but sentence pairs were given")


class RunTeacher:
    """A finished `tfm-cls train` run directory."""

    kind = "run"

    def __init__(self, path: Path, threads: int | None = None) -> None:
        self.path, self.threads = path, threads
        for name in (R.CONFIG_FILE, R.MODEL_CONFIG_FILE, R.TOKENIZER_FILE, R.LABELS_FILE, R.WEIGHTS_FILE):
            if not (path / name).is_file():
                pretraining = (path / R.PRETRAIN_CONFIG_FILE).is_file()
                raise TeacherError(
                    f"teacher.path={path}: not a finished classification run ({name} is missing"
                    + ("; it is a pretraining run, fine-tune it first" if pretraining else "") + ")"
                )
        self.weights_file = path / R.WEIGHTS_FILE
        try:
            self.labels = json.loads((path / R.LABELS_FILE).read_text(encoding="utf-8"))
            self.model_config = json.loads((path / R.MODEL_CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise TeacherError(f"teacher.path={path}: cannot read the run's labels / model config ({err})") from err
        if not isinstance(self.labels, list) or not all(isinstance(x, str) for x in self.labels):
            raise TeacherError(f"teacher.path={path}: {R.LABELS_FILE} is not a list of class names")
        try:  # what its outputs mean, and whether it reads pairs: the run's data section says
            data = load_config(ClassifierConfig, path / R.CONFIG_FILE).data
        except ConfigError as err:
            raise TeacherError(f"teacher.path={path}: {err}") from err
        self.head, self.pair = data.task, data.text_pair_column is not None
        try:
            self.sha256 = file_sha256(self.weights_file)
        except OSError as err:
            raise TeacherError(f"teacher.path={path}: cannot read {self.weights_file} ({err})") from err
        self._run: R.LoadedRun | None = None

    def _loaded(self) -> R.LoadedRun:
        if self._run is None:
            # Building the model draws random initial weights: keep the caller's RNG stream intact.
            with torch.random.fork_rng(devices=[]):
                try:
                    self._run = R.load_run(self.path)
                except RunDirError as err:
                    raise TeacherError(f"teacher.path={self.path}: {err}") from err
        return self._run

    def tokenizer(self) -> Tokenizer:
        return Tokenizer.from_file(str(self.path / R.TOKENIZER_FILE))

    def source_run(self, why: str) -> RunTeacher:
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The weights as saved (safetensors), without building the model."""
        from safetensors.torch import load_file

        return load_file(str(self.weights_file))

    def num_parameters(self) -> int:
        from safetensors import safe_open

        with safe_open(str(self.weights_file), framework="pt") as f:
            return int(sum(np.prod(f.get_slice(k).get_shape()) for k in f.keys()))

    def token_embeddings(self) -> np.ndarray:
        from safetensors import safe_open

        with safe_open(str(self.weights_file), framework="pt") as f:
            return f.get_tensor("token_embedding.embedding.weight").float().numpy()

    @torch.no_grad()
    def token_outputs(self, batch_size: int = 256) -> np.ndarray:
        run = self._loaded()
        tokenizer = Tokenizer.from_str(run.tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
        before, after = (torch.tensor(ids, dtype=torch.long) for ids in special_tokens_around(tokenizer))
        vocab = int(run.model.config["vocab_size"])
        out = np.empty((vocab, int(run.model.config["d_model"])), dtype=np.float32)
        with self._threads():
            for start in range(0, vocab, batch_size):
                ids = torch.arange(start, min(vocab, start + batch_size))[:, None]  # [n, 1]
                n = len(ids)
                input_ids = torch.cat([before.expand(n, -1), ids, after.expand(n, -1)], dim=1)  # [n, T]
                out[start : start + n] = run.model.features(input_ids).float().numpy()  # [n, D]
        return out

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        threads = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(threads)

    def logits(self, texts: list[str], batch_size: int, pairs: list[str] | None = None) -> np.ndarray:
        return self._forward(texts, batch_size, pairs, with_features=False)

    def feature_width(self) -> int:
        return int(self.model_config["d_model"])

    def logits_and_features(self, texts: list[str], batch_size: int, pairs: list[str] | None = None) -> np.ndarray:
        return self._forward(texts, batch_size, pairs, with_features=True)

    @torch.no_grad()
    def _forward(self, texts: list[str], batch_size: int, pairs: list[str] | None, *, with_features: bool) -> np.ndarray:
        _check_pairs(self, texts, pairs)
        run = self._loaded()
        tokenizer = Tokenizer.from_str(run.tokenizer.to_str())
        tokenizer.no_padding()
        if pairs is not None:  # as the teacher trained: the pair template, longer text truncated first
            encodings = pair_truncation(tokenizer).encode_batch(list(zip(texts, pairs)))
        else:
            encodings = tokenizer.encode_batch(texts)
        ids = [e.ids for e in encodings]
        types = [e.type_ids for e in encodings] if pairs is not None else None
        pad_id = run.model.config.get("pad_token_id") or 0
        width = len(self.labels) + (self.feature_width() if with_features else 0)
        out = np.empty((len(texts), width), dtype=np.float32)
        with self._threads():
            for rows in _length_batches([len(x) for x in ids], batch_size):
                input_ids, mask = pad_batch(ids, rows, pad_id)  # [B, T]
                token_types = None if types is None else torch.from_numpy(pad_types(types, rows, input_ids.shape[1]))
                logits, pooled = run.model.logits_and_features(torch.from_numpy(input_ids), torch.from_numpy(mask), token_types)
                both = torch.cat([logits, pooled], dim=1) if with_features else logits  # [B, C (+ D)]
                out[rows] = both.float().numpy()
        return out


class OnnxTeacher:
    """An ONNX file written by `tfm-cls export` (or its int8 version by `tfm-cls quantize`)."""

    kind = "onnx"

    def __init__(self, path: Path, threads: int | None = None) -> None:
        from tfm_cls.errors import InferenceError
        from tfm_cls.runtime.session import Classifier

        self.path = self.weights_file = path
        self.threads = threads
        try:
            self.classifier = Classifier(str(path), threads=threads or 0)
        except InferenceError as err:
            raise TeacherError(f"teacher.path={path}: {err}") from err
        if "logits" not in self.classifier.output_names:
            raise TeacherError(f"teacher.path={path}: the ONNX graph has no `logits` output")
        self.labels = self.classifier.labels
        self.head, self.pair = self.classifier.head.task, self.classifier.pair
        self.sha256 = file_sha256(path)

    def tokenizer(self) -> Tokenizer:
        return Tokenizer.from_str(self.classifier.tokenizer.to_str())

    def _initializers(self):
        import onnx

        return onnx.load(str(self.path), load_external_data=False).graph.initializer

    def num_parameters(self) -> int:
        return int(sum(int(np.prod(t.dims)) for t in self._initializers()))

    def source_run(self, why: str) -> RunTeacher:
        """The run the file was exported from, when it lies inside that run directory."""
        run_dir = self.path.parent
        if (run_dir / R.WEIGHTS_FILE).is_file() and (run_dir / R.LABELS_FILE).is_file():
            return RunTeacher(run_dir, self.threads)
        raise TeacherError(
            f"{why}: the ONNX teacher {self.path} lies outside its run directory, so its weights are not "
            "at hand; give teacher.path as the run directory (or an .onnx file inside it)"
        )

    def token_embeddings(self) -> np.ndarray:
        return self.source_run("student.embedding_init=teacher_pca").token_embeddings()

    def token_outputs(self, batch_size: int = 256) -> np.ndarray:
        return self.source_run("student.embedding_init=teacher_output_pca").token_outputs(batch_size)

    def feature_width(self) -> int:
        return 0  # the exported graph outputs logits and probabilities only

    def logits_and_features(self, texts: list[str], batch_size: int, pairs: list[str] | None = None) -> np.ndarray:
        raise TeacherError(f"the ONNX teacher {self.path} outputs no pooled vector; give its run directory")

    def logits(self, texts: list[str], batch_size: int, pairs: list[str] | None = None) -> np.ndarray:
        _check_pairs(self, texts, pairs)
        if pairs is not None:
            ids, types, _ = self.classifier.encode_with_types(texts, pairs)  # the pair template, token types
        else:
            (ids, _), types = self.classifier.encode(texts), None
        out = np.empty((len(texts), len(self.labels)), dtype=np.float32)
        for rows in _length_batches([len(x) for x in ids], batch_size):
            feeds = self.classifier.feeds(ids, rows, types)  # input_ids, attention_mask (+ token_type_ids)
            out[rows] = self.classifier.session.run(["logits"], feeds)[0]
        return out


def open_teacher(path: str | Path, threads: int | None = None) -> Teacher:
    """The teacher at `path` (a run directory or an .onnx file), checked but not yet loaded."""
    path = Path(path).expanduser()
    if not path.exists():
        raise TeacherError(f"teacher.path={path} does not exist (expected a classification run directory or an .onnx file)")
    if path.is_dir():
        return RunTeacher(path, threads)
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as err:
        raise TeacherError(f"teacher.path={path}: cannot read the file ({err})") from err
    return OnnxTeacher(path, threads)
