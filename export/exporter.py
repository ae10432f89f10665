"""Export tfm_cls models to self-contained ONNX files with torch's current (dynamo) exporter.

Each graph is a thin module whose `forward` takes exactly the inputs of its `ExportSpec`, in
order, under the same names, so `dynamic_shapes` can be keyed by those names. The legacy
TorchScript exporter is not used: it bakes the sample batch and sequence sizes into Reshape nodes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir
import torch
from onnxscript.rewriter.ort_fusions import optimize_for_ort
from tfm_cls.export import spec as specs
from tfm_cls.export.spec import ExportSpec
from tokenizers import Tokenizer
from torch import Tensor, nn

import tfm_cls
from tfm_cls.classify.heads import HEAD_TYPES
from tfm_cls.errors import ExportError
from tfm_cls.io import atomic_path, file_sha256
from tfm_cls.runtime.heads import SingleLabel
from tfm_cls.runtime.metadata import ExportMetadata

logger = logging.getLogger(__name__)

# Sizes of the sample inputs the graph is traced with. Verification uses other sizes, and the
# sequence axes differ from each other so the exporter cannot mistake one for another.
EXPORT_SIZES = {"batch": 2, "sequence": 8, "src_sequence": 9, "tgt_sequence": 7}


class ClassifierGraph(nn.Module):
    """input_ids, attention_mask [batch, seq] -> logits [batch, num_classes] and the head's
    scores: softmax probabilities (single_label), sigmoid probabilities (multi_label) [batch,
    num_classes], or the value [batch] (regression)."""

    def __init__(self, model: nn.Module, head: str = "single_label", temperature: float = 1.0):
        super().__init__()
        self.model = model
        self.head = HEAD_TYPES[head]()
        self.head.temperature = temperature  # calibration: the scores are those of logits / T

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        logits = self.model(input_ids, attention_mask)  # [batch, num_classes]
        return logits, self.head.torch_scores(logits)


class PairClassifierGraph(ClassifierGraph):
    """Sentence pairs: ClassifierGraph with token_type_ids [batch, seq] (0 = first text, 1 = second)."""

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> tuple[Tensor, Tensor]:
        logits = self.model(input_ids, attention_mask, token_type_ids)  # [batch, num_classes]
        return logits, self.head.torch_scores(logits)


class Seq2SeqGraph(nn.Module):
    """The whole encoder-decoder: -> logits [batch, tgt_seq, vocab]; causal mask built inside."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src_ids: Tensor, tgt_ids: Tensor, src_attention_mask: Tensor, tgt_attention_mask: Tensor):
        return self.model(src_ids, tgt_ids, src_attention_mask, tgt_attention_mask)


class EncoderGraph(nn.Module):
    """src_ids, src_attention_mask [batch, src_seq] -> memory [batch, src_seq, d_model]."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src_ids: Tensor, src_attention_mask: Tensor) -> Tensor:
        return self.model.encode(src_ids, src_attention_mask)


class DecoderGraph(nn.Module):
    """tgt_ids [batch, tgt_seq], memory [batch, src_seq, d_model], masks -> logits [batch, tgt_seq, vocab]."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(
        self, tgt_ids: Tensor, memory: Tensor, tgt_attention_mask: Tensor, memory_attention_mask: Tensor
    ) -> Tensor:
        return self.model.decode(tgt_ids, memory, tgt_attention_mask, memory_attention_mask)


def _classifier_graph(spec: ExportSpec) -> Callable[[nn.Module], nn.Module]:
    graph = PairClassifierGraph if "token_type_ids" in spec.input_names else ClassifierGraph
    head = specs.head_of(spec)
    return lambda model, temperature=1.0: graph(model, head, temperature)


# spec.task -> a function making the graph module of a model
GRAPHS: dict[str, Callable[[nn.Module], nn.Module]] = {
    **{spec.task: _classifier_graph(spec) for spec in specs.CLASSIFIER_SPECS},
    specs.SEQ2SEQ.task: Seq2SeqGraph,
    specs.SEQ2SEQ_ENCODER.task: EncoderGraph,
    specs.SEQ2SEQ_DECODER.task: DecoderGraph,
}


CLASSIFIER_TASKS = frozenset(spec.task for spec in specs.CLASSIFIER_SPECS)


def build_graph(spec: ExportSpec, model: nn.Module, temperature: float = 1.0) -> nn.Module:
    """The graph module of `spec` around `model`; a classifier's scores are those of logits /
    `temperature` (the calibration its metadata records, ExportMetadata.temperature)."""
    if spec.task in CLASSIFIER_TASKS:
        return GRAPHS[spec.task](model, temperature)
    return GRAPHS[spec.task](model)


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence the exporter's per-pass INFO logs and known-harmless warnings; errors still show."""
    quiet = {
        "onnxscript": logging.ERROR,  # e.g. "Skipping constant folding for op Split"
        "onnx_ir": logging.WARNING,
        "torch.onnx": logging.WARNING,
        # "torchvision is not installed. Skipping torchvision::nms" and the like.
        "torch.onnx._internal.exporter._registration": logging.ERROR,
    }
    loggers = [logging.getLogger(n) for n in quiet]
    levels = [lg.level for lg in loggers]
    for lg, level in zip(loggers, quiet.values()):
        lg.setLevel(level)
    with warnings.catch_warnings():
        # Emitted once per input sharing an axis name with an earlier one: expected here.
        warnings.filterwarnings("ignore", message=".*axis name.*will not be used.*")
        warnings.filterwarnings("ignore", category=FutureWarning)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def model_config(model: nn.Module) -> dict[str, Any]:
    config = getattr(model, "config", None)
    if not isinstance(config, dict):
        raise ExportError(f"{type(model).__name__} has no `config` dict of constructor arguments")
    return config


def sample_inputs(spec: ExportSpec, model: nn.Module, sizes: dict[str, int], seed: int = 0) -> dict[str, Tensor]:
    """Random inputs for `spec` at the given axis sizes: ids in the vocabulary, the last row of each
    sequence half padded (mask 0, id = pad id), float inputs standard normal."""
    config = model_config(model)
    gen = torch.Generator().manual_seed(seed)
    pad_id = int(config.get("pad_token_id", 0))
    out: dict[str, Tensor] = {}
    for t in spec.inputs:
        shape = [sizes[a] if a in sizes else int(config[a]) for a in t.shape]
        if t.dtype == "float32":
            out[t.name] = torch.randn(shape, generator=gen)
            continue
        length = torch.full((shape[0],), shape[1])
        length[-1] = max(1, shape[1] // 2)
        mask = (torch.arange(shape[1]).unsqueeze(0) < length.unsqueeze(1)).long()  # [batch, seq]
        if t.name.endswith("attention_mask"):
            out[t.name] = mask
        elif t.name == "token_type_ids":
            out[t.name] = token_types(mask, gen)
        else:
            vocab = int(config[vocab_key(t.name, config)])
            ids = torch.randint(0, vocab, shape, generator=gen)
            out[t.name] = ids.masked_fill(mask == 0, pad_id)
    return out


def token_types(mask: Tensor, gen: torch.Generator) -> Tensor:
    """Pair token types for a mask [batch, seq]: 0 up to a random point inside each row's real
    tokens, 1 after it, 0 under the padding (as the pair template makes them)."""
    lengths = mask.sum(dim=1)  # [batch]
    split = (torch.rand(lengths.shape, generator=gen) * (lengths.float() + 1)).long()  # [batch] in 0..length
    positions = torch.arange(mask.shape[1]).unsqueeze(0)  # [1, seq]
    return ((positions >= split.unsqueeze(1)) & (mask == 1)).long()  # [batch, seq]


def vocab_key(input_name: str, config: dict[str, Any]) -> str:
    """The model.config key holding the vocabulary size an id input draws from."""
    for key in (input_name.replace("_ids", "_vocab_size"), "vocab_size"):
        if key in config:
            return key
    raise ExportError(f"model.config has no vocabulary size for input {input_name!r}: {sorted(config)}")


def build_metadata(
    model: nn.Module,
    spec: ExportSpec,
    *,
    tokenizer: Tokenizer | None = None,
    labels: list[str] | None = None,
    max_length: int | None = None,
    **fields: Any,
) -> ExportMetadata:
    """Everything a deployment needs besides the graph (ExportMetadata; `fields`: more of its fields)."""
    config = model_config(model)
    return ExportMetadata(
        task=spec.task,
        model_class=type(model).__name__,
        model_config=config,
        max_length=int(max_length if max_length is not None else config["max_len"]),
        export_sizes={a: EXPORT_SIZES[a] for a in sorted(spec.dynamic_axes)},
        version=tfm_cls.__version__,
        torch_version=torch.__version__,
        opset=spec.opset,
        labels=None if labels is None else list(labels),
        tokenizer=None if tokenizer is None else tokenizer.to_str(),
        **fields,
    )


def export_graph(
    model: nn.Module, spec: ExportSpec, path: str | Path, metadata: ExportMetadata, fuse: bool = False
) -> Path:
    """Trace `model` as the graph of `spec` and write ONE self-contained .onnx file with `metadata`.

    `fuse`: rewrite attention, GELU and residual+LayerNorm into onnxruntime's fused contrib ops
    (MultiHeadAttention, BiasGelu, SkipLayerNormalization) with onnxscript's ORT fusion rules; the
    file then runs on onnxruntime only. Off by default: onnxruntime applies its own fusions when
    it loads a standard-ops graph, and `python -m benchmarks.inference` measured no gain from fusing
    ahead of time on our models (docs/export.md).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    graph = build_graph(spec, model, metadata.temperature_or_one).eval()
    inputs = sample_inputs(spec, model, EXPORT_SIZES)
    logger.info("exporting %s (%s) to %s", type(model).__name__, spec.task, path)
    with torch.no_grad(), _quiet_exporter():
        try:
            program = torch.onnx.export(
                graph,
                tuple(inputs[name] for name in spec.input_names),
                dynamo=True,
                input_names=spec.input_names,
                output_names=spec.output_names,
                dynamic_shapes=spec.dynamic_shapes(),
                opset_version=spec.opset,
                optimize=True,
                verbose=False,
            )
        except Exception as err:  # the exporter raises many types; say which graph failed and why
            raise ExportError(f"torch.onnx.export failed for the {spec.task} graph of {type(model).__name__}: {err}") from err
    onnx_model = program.model
    fusions: dict[str, int] = {}
    if fuse:
        with _quiet_exporter():
            onnx_model, counts = optimize_for_ort(onnx_model)
        fusions = {name: n for name, n in counts.items() if n}
        logger.info("onnxruntime fusions: %s", fusions or "none matched")
    onnx_model.metadata_props.update(dataclasses.replace(metadata, fusions=fusions).to_props())
    onnx_model.doc_string = f"tfm_cls {spec.task} model exported with torch {torch.__version__}"
    ir.save(onnx_model, str(path))  # weights inline: no external-data sidecar
    sidecar = path.with_name(path.name + ".data")
    if sidecar.exists():  # a left-over from an earlier export would be mistaken for ours
        sidecar.unlink()
    onnx.checker.check_model(str(path))
    return path


def export_classifier(
    model: nn.Module,
    path: str | Path,
    *,
    tokenizer: Tokenizer | None,
    labels: list[str],
    max_length: int | None = None,
    fuse: bool = False,
    head: SingleLabel | None = None,
    pair: bool = False,
    **fields: Any,
) -> Path:
    """TransformerClassifier -> one .onnx file (logits and the head's scores) with tokenizer and
    labels inside. `head` (a tfm_cls.classify.heads head; None: single-label) adds the task and, for
    multi-label, the thresholds to the metadata; `pair`: a token_type_ids input for sentence pairs;
    `fields`: more ExportMetadata fields (the weights digest, the long-text policy)."""
    num_classes = int(model_config(model)["num_classes"])
    task_head = head or SingleLabel()
    expected = task_head.num_outputs(len(labels))
    if expected != num_classes:
        raise ExportError(f"{len(labels)} label names for a {task_head.task} model with num_classes={num_classes}")
    if pair and int(model_config(model).get("type_vocab_size", 0)) < 2:
        raise ExportError("a sentence-pair export needs a model with token-type embeddings (type_vocab_size >= 2)")
    spec = specs.classifier_spec(task_head.task, pair)
    fields = {**task_head.metadata(pair), **fields}
    if callable(getattr(model, "compacted", None)):  # a bag of terms: only the rows its training texts hold
        model = model.compacted()
    meta = build_metadata(model, spec, tokenizer=tokenizer, labels=labels, max_length=max_length, **fields)
    path = export_graph(model, spec, path, meta, fuse)
    if model_config(model).get("wide_int8"):
        int8_bag_table(path)
    return path


def int8_bag_table(path: Path) -> None:
    """A bag whose weights the run put on the int8 grid (tfm_cls.bag.shrink, `wide_int8` in its config):
    its weight table rewritten as int8 rows and one scale each (export/quantize.quantize_embeddings, whose
    grid it is: the same logits), a quarter of the bytes; said in the file's `tfm_cls.quantization`."""
    import onnxruntime
    from tfm_cls.export.quantize import quantize_embeddings

    model = onnx.load(str(path))
    tables = quantize_embeddings(model)
    meta = {p.key: p.value for p in model.metadata_props}
    meta["tfm_cls.quantization"] = json.dumps(
        {"method": "the run's int8 grid (tfm_cls.bag.shrink)", "weights": "fp32", "per_channel": False,
         "embeddings": "int8 per-row" if tables else "fp32", "onnxruntime": onnxruntime.__version__})
    onnx.helper.set_model_props(model, meta)
    onnx.save(model, str(path))
    onnx.checker.check_model(str(path))


def export_seq2seq(
    model: nn.Module,
    out_dir: str | Path,
    *,
    tokenizer: Tokenizer | None = None,
    max_length: int | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    fuse: bool = False,
) -> dict[str, Path]:
    """Seq2SeqTransformer -> model.onnx (monolithic), encoder.onnx and decoder.onnx in `out_dir`."""
    out_dir = Path(out_dir)
    # Each split half names its partner, so the decoder's verification can run greedy decoding.
    extra = {"bos_id": bos_id, "eos_id": eos_id, "encoder_file": specs.SEQ2SEQ_ENCODER.file_name,
             "decoder_file": specs.SEQ2SEQ_DECODER.file_name}
    paths = {}
    for spec in (specs.SEQ2SEQ, specs.SEQ2SEQ_ENCODER, specs.SEQ2SEQ_DECODER):
        meta = build_metadata(model, spec, tokenizer=tokenizer, max_length=max_length, **extra)
        paths[spec.task] = export_graph(model, spec, out_dir / spec.file_name, meta, fuse)
    return paths


def export_run(
    run_dir: str | Path, output: str | Path | None = None, fuse: bool = False,
    check: Callable[[nn.Module, Path], None] | None = None, candidate: str | None = None,
) -> Path:
    """Export the trained classifier of a run directory to `output` (default RUN/model.onnx).

    The file is written under a temporary name beside `output`, `check(model, temporary path)`
    (the verifier) runs on it, and only then is it renamed over `output`: a failed export or
    verification, or a full disk, leaves an earlier `output` untouched. The metadata records the
    sha256 of the run's model.safetensors (ExportMetadata.weights_sha256), so a retrained run's
    stale export is refused by infer and verify-onnx. `candidate`: another model the run made
    (RUN/candidates/NAME, tfm_cls.bag.candidates) instead of the one it ships."""
    from tfm_cls.classify.predict import run_head
    from tfm_cls.data.tokenizer import long_text_of, max_length_of
    from tfm_cls.runs import WEIGHTS_FILE, candidate_folder, load_run

    run = load_run(run_dir, candidate=candidate)
    path = Path(output) if output else Path(run_dir) / specs.CLASSIFIER.file_name
    if path.is_dir():
        raise ExportError(f"--output {path} is a folder; name the .onnx file to write")
    digest = file_sha256(candidate_folder(run_dir, candidate) / WEIGHTS_FILE)
    pair = run.config.data.text_pair_column is not None
    head = run_head(run)
    with atomic_path(path) as tmp:
        export_classifier(
            run.model,
            tmp,
            tokenizer=run.tokenizer,
            labels=run.labels,
            max_length=max_length_of(run.tokenizer),
            fuse=fuse,
            # The truncation strategy and chunking of the run, for the torch-free runtime.
            weights_sha256=digest, long_text=long_text_of(run.config.tokenizer, run.config.inference),
            head=head,
            pair=pair,
        )
        if check is not None:
            check(run.model, tmp)
    return path
