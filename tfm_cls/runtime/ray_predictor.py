"""An exported classifier as a Ray Data predictor: the callable class of `Dataset.map_batches`.

    ds.map_batches(OnnxClassifier, fn_constructor_kwargs={"model": "model.onnx"},
                   compute=ray.data.ActorPoolStrategy(size=2), batch_size=1024, num_cpus=1)

Each actor opens the .onnx file once (one onnxruntime session with `threads` intra-op threads).
A batch (pyarrow Table, pandas DataFrame or a dict of numpy arrays: any of Ray's batch formats)
comes back as a pyarrow Table holding its input columns plus the prediction fields of each row,
built by `writers.output_row`, so they are exactly what `tfm-cls infer` writes: `label`, `score`,
`probabilities` (a struct, one field per label) for single-label models; `labels`, `scores`,
`probabilities` for multi-label ones; `value` for regression; `truncated`, `windows` (chunked
inference) and `empty`.

Bad texts (docs/batch-inference.md): a null, empty or blank text gets a row with `empty` true and
no label, as an empty line does in `tfm-cls infer`. A value that is not a string (a number, a
list) is an InferenceError naming the column, the row and its id (`invalid="error"`, the default),
or with `invalid="column"` a row like an empty one whose `error` column says what was wrong (a
column of mixed types comes back as strings). No row is ever dropped. Nothing here imports ray: the class is plain Python that Ray instantiates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.readers import Record
from tfm_cls.runtime.session import Classifier
from tfm_cls.runtime.writers import output_row

INVALID_POLICIES = ("error", "column")
ROW_KEYS = ("id", "line")
"""Keys of `output_row` that come from the input record: the batch's own columns carry them."""


def _pyarrow():
    try:
        import pyarrow
    except ImportError:
        raise InferenceError("the Ray Data predictor needs pyarrow: pip install 'tfm-cls[ray]'") from None
    return pyarrow


def _column(values: list, pa):
    """An Arrow array of a column's values; one of mixed types (a number among texts) becomes
    strings, nulls kept (its rows say what was wrong)."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def as_columns(batch: Any) -> dict[str, list]:
    """The columns of a Ray batch as Python lists: a pyarrow Table, a pandas DataFrame or a dict of
    columns (numpy arrays or lists)."""
    pa = _pyarrow()
    if isinstance(batch, pa.Table):
        return {name: batch.column(name).to_pylist() for name in batch.column_names}
    if isinstance(batch, dict):
        return {k: v.tolist() if isinstance(v, np.ndarray) else list(v) for k, v in batch.items()}
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):  # a pandas DataFrame
        import pandas

        return {str(k): [None if _is_na(v, pandas) else v for v in batch[k].tolist()] for k in batch.columns}
    raise InferenceError(f"a batch must be a pyarrow Table, a pandas DataFrame or a dict of columns, got {type(batch).__name__}")


def _is_na(value: Any, pandas) -> bool:
    """pandas' missing value (None, NaN, pd.NA, NaT) in an object or string column."""
    na = pandas.isna(value)
    return isinstance(na, (bool, np.bool_)) and bool(na)


class OnnxClassifier:
    """The predictor Ray constructs once per actor. `model`: a tfm_cls .onnx file readable on every
    node; `text_column` (and `pair_column`, which sentence-pair models need) name the input
    columns; `id_column`, where the batch has it, names the row in error messages; `threads`:
    onnxruntime intra-op threads (match the actor's num_cpus); `invalid`: "error" or "column"
    (module docstring); the other keywords are those of `Classifier` (long-text overrides,
    token-budget batching inside a Ray batch)."""

    def __init__(
        self,
        model: str,
        text_column: str = "text",
        pair_column: str | None = None,
        id_column: str | None = "id",
        threads: int = 1,
        invalid: str = "error",
        max_length: int | None = None,
        long_text: dict[str, Any] | None = None,
        batching: str = "tokens",
        batch_size: int = 32,
        max_tokens: int | None = None,
    ):
        if invalid not in INVALID_POLICIES:
            raise InferenceError(f"invalid must be one of {list(INVALID_POLICIES)}, got {invalid!r}")
        extra = {} if max_tokens is None else {"max_tokens": max_tokens}
        self.classifier = Classifier(str(model), None, threads, max_length, long_text, batching, batch_size, **extra)
        if self.classifier.pair and not pair_column:
            raise InferenceError(f"{model} classifies sentence pairs: give pair_column, the second text's column")
        self.text_column, self.id_column, self.invalid = text_column, id_column, invalid
        self.pair_column = pair_column if self.classifier.pair else None
        self.model = str(model)

    # ---- one batch ---------------------------------------------------------------------------

    def __call__(self, batch: Any):
        """The batch's columns plus one prediction per row, in the batch's order ([rows] columns)."""
        pa = _pyarrow()
        given = as_columns(batch)
        wanted = [self.text_column, *([self.pair_column] if self.pair_column else [])]
        missing = [c for c in wanted if c not in given]
        if missing:
            raise InferenceError(f"the batch has no column {missing} (columns: {list(given)}); "
                                 "set text_column / pair_column")
        texts = given[self.text_column]
        pairs = given[self.pair_column] if self.pair_column else None
        ids = given.get(self.id_column) if self.id_column else None
        errors = [self._problem(texts, pairs, i, ids) for i in range(len(texts))]
        rows = self._rows(texts, pairs, errors)
        columns = {key: [row[key] for row in rows] for key in (rows[0] if rows else self.empty_row())
                   if key not in ROW_KEYS}
        if self.invalid == "column":
            columns["error"] = errors
        out = batch if isinstance(batch, pa.Table) else pa.table({k: _column(v, pa) for k, v in given.items()})
        for name, values in columns.items():
            array = pa.array(values, type=self._type(name, pa))
            if name in out.column_names:  # a prediction column replaces an input column of that name
                out = out.set_column(out.column_names.index(name), name, array)
            else:
                out = out.append_column(name, array)
        return out

    def _problem(self, texts: list, pairs: list | None, i: int, ids: list | None) -> str | None:
        """What is wrong with row i (None: nothing): a text or pair that is neither null nor a string."""
        where = f"row {i} of the batch" + (f" (id {ids[i]!r})" if ids is not None else "")
        for column, values in ((self.text_column, texts), (self.pair_column, pairs)):
            if values is not None and values[i] is not None and not isinstance(values[i], str):
                problem = f"{where}: column {column!r} holds {type(values[i]).__name__}, expected a string"
                if self.invalid == "error":
                    raise InferenceError(problem + " (invalid='column' gives such rows an error column instead)")
                return problem
        text = texts[i] or ""
        if pairs is not None and text.strip() and not (pairs[i] or "").strip():
            problem = f"{where}: the pair's second text {self.pair_column!r} is missing or empty"
            if self.invalid == "error":
                raise InferenceError(problem)
            return problem
        return None

    def _rows(self, texts: list, pairs: list | None, errors: list) -> list[dict[str, Any]]:
        """`output_row` of every text: empty (null, blank or invalid) ones get no scores."""
        clf = self.classifier
        full = [i for i, t in enumerate(texts) if errors[i] is None and isinstance(t, str) and t.strip()]
        records = {i: Record("", texts[i], 0) for i in full}
        probs, truncated, windows = (clf.classify([texts[i] for i in full], None, [pairs[i] for i in full] if pairs
                                                  else None) if full else ([], [], []))
        chosen = clf.decide(probs) if full else None
        shown = clf.policy.chunk
        empty = output_row(Record("", "", 0), clf.head, clf.labels, None, False, 0 if shown else None)
        rows: list[dict[str, Any]] = [empty] * len(texts)  # the same row for every empty text: never mutated
        for k, i in enumerate(full):
            rows[i] = output_row(records[i], clf.head, clf.labels, probs[k], truncated[k],
                                 windows[k] if shown else None, None if chosen is None else chosen[k])
        return rows

    def empty_row(self) -> dict[str, Any]:
        """The keys of a row, for a batch with no rows."""
        clf = self.classifier
        return output_row(Record("", "", 0), clf.head, clf.labels, None, False, 0 if clf.policy.chunk else None)

    def _type(self, name: str, pa):
        """The Arrow type of a prediction column (fixed, so that an all-null batch agrees with the rest)."""
        labels = self.classifier.labels
        probabilities = pa.struct([(label, pa.float64()) for label in labels])
        types = {"label": pa.string(), "score": pa.float64(), "probabilities": probabilities,
                 "labels": pa.list_(pa.string()), "scores": pa.list_(pa.float64()), "value": pa.float64(),
                 "truncated": pa.bool_(), "windows": pa.int64(), "empty": pa.bool_(), "error": pa.string()}
        return types[name]

    def output_schema(self):
        """The prediction columns' Arrow schema (what a batch gains)."""
        pa = _pyarrow()
        names = [k for k in self.empty_row() if k not in ROW_KEYS] + (["error"] if self.invalid == "column" else [])
        return pa.schema([(n, self._type(n, pa)) for n in names])
