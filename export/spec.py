"""Declarative ONNX export specs: names, dtypes, dynamic axes, opset and tolerances of each graph.

The exporter builds graphs from these specs and `tfm_cls.export.verify.verify` checks exported files
against them, so the two cannot drift apart. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tfm_cls.runtime.heads import RUNTIME_HEADS, SingleLabel
from tfm_cls.runtime.metadata import FORMAT_KEY, FORMAT_VERSION, PAIR_SUFFIX, TASK_KEY

__all__ = ["FORMAT_KEY", "FORMAT_VERSION", "TASK_KEY", "PAIR_SUFFIX"]  # the metadata's, defined there

DEFAULT_OPSET = 18

# Verification tolerance on float outputs, per execution provider (max absolute difference).
TOLERANCES = {"CPUExecutionProvider": 1e-4, "CUDAExecutionProvider": 1e-3}


@dataclass(frozen=True, kw_only=True)
class TensorSpec:
    """One graph input or output.

    `shape` names every axis. Names in the owning spec's `dynamic_axes` must stay symbolic in the
    ONNX file; every other name is a fixed size read from `model.config[name]` (e.g. "num_classes").
    """

    name: str
    dtype: str  # numpy dtype name: "int64", "float32"
    shape: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ExportSpec:
    """What one ONNX graph takes, returns and how closely it must match PyTorch."""

    task: str
    """Recorded in the file's metadata under TASK_KEY; selects how the file is verified."""
    file_name: str
    """Default file name inside a run directory."""
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    dynamic_axes: frozenset[str]
    opset: int = DEFAULT_OPSET
    tolerances: dict[str, float] = field(default_factory=lambda: dict(TOLERANCES))

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    def dynamic_shapes(self) -> dict[str, dict[int, str]]:
        """`{input name: {axis index: axis name}}` for the dynamic axes of each input."""
        return {
            t.name: {i: axis for i, axis in enumerate(t.shape) if axis in self.dynamic_axes} for t in self.inputs
        }


_BS = ("batch", "sequence")
CLASSIFIER = ExportSpec(
    task=SingleLabel.onnx_task,
    file_name="model.onnx",
    inputs=(
        TensorSpec(name="input_ids", dtype="int64", shape=_BS),
        TensorSpec(name="attention_mask", dtype="int64", shape=_BS),  # 1 = token, 0 = padding
    ),
    outputs=(
        TensorSpec(name="logits", dtype="float32", shape=("batch", "num_classes")),
        TensorSpec(name="probabilities", dtype="float32", shape=("batch", "num_classes")),
    ),
    dynamic_axes=frozenset(_BS),
)

# The other heads (tfm_cls.runtime.heads) and sentence pairs: the same graph with their own outputs
# and, for pairs, a third input. The file's "tfm_cls.task" names one of these specs.
CLASSIFIER_TASKS = {task: head.onnx_task for task, head in RUNTIME_HEADS.items()}
TOKEN_TYPES = TensorSpec(name="token_type_ids", dtype="int64", shape=_BS)  # 0 = first text, 1 = second


def classifier_spec(head: str = "single_label", pair: bool = False) -> ExportSpec:
    """The spec of a classifier with `head` (single_label: softmax `probabilities`; multi_label:
    sigmoid `probabilities`; regression: `value` [batch]) and, for pairs, `token_type_ids`."""
    if head not in CLASSIFIER_TASKS:
        raise ValueError(f"unknown head {head!r}; expected one of {sorted(CLASSIFIER_TASKS)}")
    if RUNTIME_HEADS[head] is SingleLabel and not pair:
        return CLASSIFIER
    score_output = RUNTIME_HEADS[head].score_output
    second = TensorSpec(name=score_output, dtype="float32",
                        shape=("batch",) if score_output == "value" else ("batch", "num_classes"))
    return ExportSpec(
        task=CLASSIFIER_TASKS[head] + (PAIR_SUFFIX if pair else ""),
        file_name="model.onnx",
        inputs=CLASSIFIER.inputs + ((TOKEN_TYPES,) if pair else ()),
        outputs=(CLASSIFIER.outputs[0], second),
        dynamic_axes=frozenset(_BS),
    )


def head_of(spec: ExportSpec) -> str | None:
    """The head of a classifier spec (None for the seq2seq graphs)."""
    for head, task in CLASSIFIER_TASKS.items():
        if spec.task in (task, task + PAIR_SUFFIX):
            return head
    return None


CLASSIFIER_SPECS = tuple(classifier_spec(h, p) for h in CLASSIFIER_TASKS for p in (False, True))

_SRC = ("batch", "src_sequence")
_TGT = ("batch", "tgt_sequence")
SEQ2SEQ = ExportSpec(
    task="seq2seq",
    file_name="model.onnx",
    inputs=(
        TensorSpec(name="src_ids", dtype="int64", shape=_SRC),
        TensorSpec(name="tgt_ids", dtype="int64", shape=_TGT),
        TensorSpec(name="src_attention_mask", dtype="int64", shape=_SRC),
        TensorSpec(name="tgt_attention_mask", dtype="int64", shape=_TGT),
    ),
    outputs=(TensorSpec(name="logits", dtype="float32", shape=("batch", "tgt_sequence", "tgt_vocab_size")),),
    dynamic_axes=frozenset(("batch", "src_sequence", "tgt_sequence")),
)

SEQ2SEQ_ENCODER = ExportSpec(
    task="seq2seq-encoder",
    file_name="encoder.onnx",
    inputs=(
        TensorSpec(name="src_ids", dtype="int64", shape=_SRC),
        TensorSpec(name="src_attention_mask", dtype="int64", shape=_SRC),
    ),
    outputs=(TensorSpec(name="memory", dtype="float32", shape=("batch", "src_sequence", "d_model")),),
    dynamic_axes=frozenset(_SRC),
)

SEQ2SEQ_DECODER = ExportSpec(
    task="seq2seq-decoder",
    file_name="decoder.onnx",
    inputs=(
        TensorSpec(name="tgt_ids", dtype="int64", shape=_TGT),
        TensorSpec(name="memory", dtype="float32", shape=("batch", "src_sequence", "d_model")),
        TensorSpec(name="tgt_attention_mask", dtype="int64", shape=_TGT),
        TensorSpec(name="memory_attention_mask", dtype="int64", shape=_SRC),
    ),
    outputs=(TensorSpec(name="logits", dtype="float32", shape=("batch", "tgt_sequence", "tgt_vocab_size")),),
    dynamic_axes=frozenset(("batch", "src_sequence", "tgt_sequence")),
)

SPECS = {s.task: s for s in (*CLASSIFIER_SPECS, SEQ2SEQ, SEQ2SEQ_ENCODER, SEQ2SEQ_DECODER)}


def spec_for_task(task: str | None, where: str = "model") -> ExportSpec:
    """The spec of a task name read from a file's metadata; a clear error for anything else."""
    if task not in SPECS:
        raise ValueError(f"{where}: unknown tfm_cls task {task!r}; expected one of {sorted(SPECS)}")
    return SPECS[task]
