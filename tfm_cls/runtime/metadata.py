"""The metadata of a tfm_cls ONNX file: every key defined once, in one dataclass.

An export carries, besides its graph, what a deployment needs: the tokenizer, the label names,
the maximum length, the long-text policy, the head's decision rule and the sha256 of the weights
it came from. The exporter writes `ExportMetadata.to_props()`, the runtime and the verifier read
`ExportMetadata.from_props(...)`; a file whose metadata does not parse is one InferenceError.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from tfm_cls.errors import InferenceError
from tfm_cls.io import file_sha256
from tfm_cls.runtime.heads import RUNTIME_HEADS
from tfm_cls.runtime.text import LongText

FORMAT_KEY = "tfm_cls.format"
FORMAT_VERSION = "tfm_cls-onnx/1"
TASK_KEY = "tfm_cls.task"
PAIR_SUFFIX = "-pair"
# The file name of the weights a run's export comes from (tfm_cls.runs.WEIGHTS_FILE is this one).
WEIGHTS_FILE = "model.safetensors"

# metadata key -> ExportMetadata field, in the order the exporter writes them. Values are strings
# in the file: JSON for the fields below marked so, plain text for the rest.
KEYS = {
    FORMAT_KEY: "format",
    TASK_KEY: "task",
    "tfm_cls.model_class": "model_class",
    "tfm_cls.model_config": "model_config",
    "tfm_cls.max_length": "max_length",
    "tfm_cls.export_sizes": "export_sizes",
    "tfm_cls.version": "version",
    "torch.version": "torch_version",
    "onnx.opset": "opset",
    "tfm_cls.labels": "labels",
    "tfm_cls.tokenizer": "tokenizer",
    "tfm_cls.bos_id": "bos_id",
    "tfm_cls.eos_id": "eos_id",
    "tfm_cls.encoder_file": "encoder_file",
    "tfm_cls.decoder_file": "decoder_file",
    "tfm_cls.head": "head",
    "tfm_cls.ensure_label": "ensure_label",
    "tfm_cls.thresholds": "thresholds",
    "tfm_cls.fixed_threshold": "fixed_threshold",
    "tfm_cls.text_pair": "text_pair",
    "tfm_cls.temperature": "temperature",
    "tfm_cls.weights_sha256": "weights_sha256",
    "tfm_cls.long_text": "long_text",
    "tfm_cls.fusions": "fusions",
    "tfm_cls.quantization": "quantization",
}
FIELD_KEYS = {field: key for key, field in KEYS.items()}
_JSON_FIELDS = {"model_config", "export_sizes", "labels", "ensure_label", "thresholds", "fixed_threshold",
                "text_pair", "fusions", "quantization", "temperature"}
_INT_FIELDS = {"max_length", "opset", "bos_id", "eos_id"}
# The fields of a head's decision rule: written exactly when the file's head has them.
_DECISION_FIELDS = {name for head in RUNTIME_HEADS.values() for name in head.decision_fields}
# What a classifier export cannot be run without.
CLASSIFIER_REQUIRED = ("labels", "max_length", "model_config", "tokenizer")


@dataclasses.dataclass(kw_only=True)
class ExportMetadata:
    """What one tfm_cls .onnx file says about itself (every field is one metadata key, KEYS).

    A field that is None is absent from the file. `head` is None in a single-label, single-text
    classifier (such files carry exactly what they did before task types existed)."""

    format: str = FORMAT_VERSION
    task: str
    """The graph's spec (export/spec.py): text-classification, multi-label-classification,
    text-regression (+ "-pair"), seq2seq, seq2seq-encoder, seq2seq-decoder."""
    model_class: str | None = None
    model_config: dict[str, Any] | None = None
    max_length: int | None = None
    export_sizes: dict[str, int] | None = None
    version: str | None = None
    """The tfm_cls version that exported the file."""
    torch_version: str | None = None
    opset: int | None = None
    labels: list[str] | None = None
    tokenizer: str | None = None
    """The tokenizer as `tokenizers` JSON (Tokenizer.from_str)."""
    bos_id: int | None = None
    eos_id: int | None = None
    encoder_file: str | None = None
    decoder_file: str | None = None
    head: str | None = None
    ensure_label: bool = True
    """Multi-label: a row with no label over its threshold gets its most probable label."""
    thresholds: list[float] | None = None
    """Multi-label: the tuned threshold of each label (None: `fixed_threshold` for all)."""
    fixed_threshold: float = 0.5
    text_pair: bool | None = None
    temperature: float | None = None
    """Calibration: the scores are softmax(logits / temperature) (tfm_cls.classify.calibration); absent in
    uncalibrated exports and in those made before calibration existed, which read as 1.0."""
    weights_sha256: str | None = None
    """sha256 of the run's model.safetensors the file was exported from (the stale-export check)."""
    long_text: LongText | None = None
    fusions: dict[str, int] | None = None
    quantization: dict[str, Any] | None = None

    @property
    def pair(self) -> bool:
        """A sentence-pair model (a token_type_ids input)."""
        return self.task.endswith(PAIR_SUFFIX)

    @property
    def spec_task(self) -> str:
        """The task without the pair suffix."""
        return self.task.removesuffix(PAIR_SUFFIX)

    def to_props(self) -> dict[str, str]:
        """The ONNX metadata_props of these values (strings; absent fields left out)."""
        props = {}
        decision = RUNTIME_HEADS[self.head].decision_fields if self.head in RUNTIME_HEADS else ()
        for key, name in KEYS.items():
            value = getattr(self, name)
            if name in _DECISION_FIELDS:
                if name not in decision:
                    continue
            elif value is None:
                continue
            if name == "long_text":
                props[key] = value.to_json()
            elif name == "labels":
                props[key] = json.dumps(list(value), ensure_ascii=False)
            elif name == "model_config":
                props[key] = json.dumps(value, sort_keys=True)
            elif name in _JSON_FIELDS:
                props[key] = json.dumps(value)
            else:
                props[key] = str(value)
        return props

    @classmethod
    def from_props(cls, props: Mapping[str, str], where: str = "model") -> ExportMetadata:
        """The metadata of a file's metadata_props; InferenceError naming `where` for a file that is
        not ours or whose values do not parse. Keys of other tools are ignored."""
        if props.get(FORMAT_KEY) != FORMAT_VERSION:
            found = props.get(FORMAT_KEY, "no such key")
            raise InferenceError(
                f"{where} is not a tfm_cls model: metadata {FORMAT_KEY!r} should be {FORMAT_VERSION!r}, "
                f"found {found!r}. Export one with `tfm-cls export --run RUN`."
            )
        if TASK_KEY not in props:
            raise InferenceError(f"{where} carries the tfm_cls marker but no {TASK_KEY!r}; re-export it")
        values: dict[str, Any] = {}
        for key, name in KEYS.items():
            if key not in props:
                continue
            text = props[key]
            try:
                if name == "long_text":
                    values[name] = LongText.from_json(text)
                elif name in _JSON_FIELDS:
                    values[name] = json.loads(text)
                elif name in _INT_FIELDS:
                    values[name] = int(text)
                else:
                    values[name] = text
            except (ValueError, TypeError) as err:
                raise InferenceError(f"{where}: unreadable tfm_cls metadata {key!r} ({err}); re-export it") from None
        if values.get("fixed_threshold", 0.5) is None or values.get("ensure_label", True) is None:
            raise InferenceError(f"{where}: unreadable tfm_cls thresholds (null); re-export it")
        temperature = values.get("temperature")
        if "temperature" in values and not (isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
                                            and math.isfinite(temperature) and temperature > 0):
            raise InferenceError(f"{where}: tfm_cls metadata {FIELD_KEYS['temperature']!r} should be a positive "
                                 f"number, found {temperature!r}; re-export it")
        return cls(**values)

    @property
    def temperature_or_one(self) -> float:
        """The calibration temperature (1.0 where the file records none)."""
        return 1.0 if self.temperature is None else float(self.temperature)

    def require_classifier(self, where: str) -> None:
        """A classifier export has everything `Classifier` reads, with values of the right types."""
        missing = [FIELD_KEYS[name] for name in CLASSIFIER_REQUIRED if getattr(self, name) is None]
        if missing:
            raise InferenceError(
                f"{where} carries the tfm_cls marker but lacks the metadata {missing}; "
                "re-export it with `tfm-cls export --run RUN`"
            )
        labels_ok = isinstance(self.labels, list) and all(isinstance(x, str) for x in self.labels)
        if not labels_ok or not isinstance(self.model_config, dict) or "pad_token_id" not in self.model_config:
            raise InferenceError(f"{where}: unreadable tfm_cls metadata (labels or model_config); re-export it")


def read_props(session: Any) -> dict[str, str]:
    """The metadata_props of an onnxruntime session."""
    return dict(session.get_modelmeta().custom_metadata_map)


CANDIDATES_DIR = "candidates"
"""RUN/candidates/: the models a run made but did not ship (tfm_cls.runs.CANDIDATES_DIR is this one)."""


def stale_export_problem(
    meta: ExportMetadata, model_path: str | os.PathLike, weights: str | os.PathLike | None = None
) -> str | None:
    """Why an export is stale (exported from other weights than its run's model.safetensors, by
    default the one beside it: the run was retrained since), or None. Outside a run directory,
    or for a file that records no digest, nothing can be told."""
    beside = weights is None
    if weights is None:
        weights = os.path.join(os.path.dirname(os.path.abspath(model_path)), WEIGHTS_FILE)
    if meta.weights_sha256 is None or not os.path.isfile(weights):
        return None
    if file_sha256(weights) == meta.weights_sha256:
        return None
    # a run's other candidates (RUN/candidates/NAME/model.safetensors, tfm-cls export --candidate) are
    # its weights too: a file exported from one of them beside the run is no stale export
    folder = os.path.join(os.path.dirname(weights), CANDIDATES_DIR)
    if beside and os.path.isdir(folder) and any(
            file_sha256(os.path.join(folder, name, WEIGHTS_FILE)) == meta.weights_sha256
            for name in sorted(os.listdir(folder)) if os.path.isfile(os.path.join(folder, name, WEIGHTS_FILE))):
        return None
    return (f"{model_path} was exported from other weights than {weights} beside it (the run was retrained "
            f"since); re-export it: tfm-cls export --run {os.path.dirname(weights) or '.'}")
