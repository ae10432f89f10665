"""The one verifier of exported graphs, shared by the tests, `tfm-cls verify-onnx` and `make verify-onnx`.

`verify(torch_model, onnx_path)` checks, in this order, and stops at the first stage that fails:

0. metadata  the file's metadata parses into ExportMetadata and writes back unchanged, and the
             file was exported from the weights of its run (else StaleExportError: re-export);
1. names     the graph's input and output names and dtypes are the spec's;
2. axes      every axis the spec calls dynamic is symbolic (named as in the spec), the others
             have the model's sizes;
3. shapes    on every test case, each output has the expected shape;
4. values    on every test case, outputs are finite (no NaN, also for fully padded rows) and
             within the provider's tolerance of PyTorch, with identical argmax;
5. greedy    (seq2seq) greedy decoding with numpy + onnxruntime gives PyTorch's tokens.

Test cases are fresh random inputs at sizes other than the export sizes: batch 1 and larger
batches, sequence 1, sequences longer than at export up to the model's maximum, rows with and
without padding, and a fully padded row. Stages 3-5 run on CPUExecutionProvider and, where
onnxruntime-gpu and a GPU are present, on CUDAExecutionProvider against a CUDA torch reference;
otherwise the GPU stage is reported as skipped, with the reason.

Any violation raises VerificationError, whose message is the full report with the worst
difference, the output and the case it came from.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from tfm_cls.export import spec as specs
from tfm_cls.export.exporter import EXPORT_SIZES, token_types, vocab_key
from tfm_cls.export.greedy_decode import MonolithicGreedyDecoder, SplitGreedyDecoder
from tfm_cls.export.spec import ExportSpec
from torch import Tensor, nn

from tfm_cls.errors import InferenceError, StaleExportError
from tfm_cls.model.wide import longest_input
from tfm_cls.runtime.metadata import KEYS, ExportMetadata, read_props, stale_export_problem

logger = logging.getLogger(__name__)

CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"
_ORT_DTYPES = {"int64": "tensor(int64)", "float32": "tensor(float)"}


class VerificationError(AssertionError):
    """An exported graph does not match its spec or its PyTorch model; `.report` says where."""

    def __init__(self, report: VerifyReport):
        super().__init__(str(report))
        self.report = report


@dataclass
class Check:
    name: str
    status: str  # "ok", "FAIL" or "skip"
    detail: str


@dataclass
class VerifyReport:
    path: str
    task: str
    checks: list[Check] = field(default_factory=list)
    worst_diff: float = 0.0
    worst_where: str = ""

    @property
    def ok(self) -> bool:
        return all(c.status != "FAIL" for c in self.checks)

    def add(self, name: str, status: str, detail: str) -> None:
        self.checks.append(Check(name, status, detail))
        logger.debug("%-5s %s: %s", status, name, detail)  # the caller shows the whole report once

    def __str__(self) -> str:
        lines = [f"verify {self.path} ({self.task}): {'PASSED' if self.ok else 'FAILED'}"]
        lines += [f"  [{c.status:>4}] {c.name}: {c.detail}" for c in self.checks]
        if self.worst_where:
            lines.append(f"  worst difference {self.worst_diff:.3g} ({self.worst_where})")
        return "\n".join(lines)


@dataclass
class Case:
    """One verification input: batch size, and per sequence axis its size and each row's length
    (the number of real tokens; 0 = a fully padded row)."""

    name: str
    batch: int
    sizes: dict[str, int]
    lengths: dict[str, list[int]]


# ---- test cases --------------------------------------------------------------------------------


def default_cases(spec: ExportSpec, export_sizes: dict[str, int], max_len: int, seed: int = 0) -> list[Case]:
    """Cases at sizes other than the export sizes (see the module docstring)."""
    rng = np.random.default_rng(seed)
    axes = sorted(a for a in spec.dynamic_axes if a != "batch")

    def longer(a: str) -> int:
        return min(max_len, 2 * export_sizes.get(a, 8) + 3)

    def mixed(size: int, reverse: bool) -> list[int]:
        # full, partly padded, a single token, fully padded, full; a second axis gets the pattern
        # reversed so its fully padded row falls on a different row.
        partial = int(rng.integers(2, size)) if size > 2 else 1
        pattern = [size, partial, 1, 0, size]
        return pattern[::-1] if reverse else pattern

    cases = [
        Case("batch 1, length 1", 1, {a: 1 for a in axes}, {a: [1] for a in axes}),
        Case("batch 1, longer than export, no padding", 1, {a: longer(a) for a in axes}, {a: [longer(a)] for a in axes}),
        Case(
            "batch 5, longer than export, mixed padding with a fully padded row",
            5,
            {a: longer(a) for a in axes},
            {a: mixed(longer(a), i % 2 == 1) for i, a in enumerate(axes)},
        ),
        Case("batch 3, length 3, padded rows", 3, {a: 3 for a in axes}, {a: [3, 2, 1] for a in axes}),
        Case(
            "batch 2, maximum length",
            2,
            {a: max_len for a in axes},
            {a: [max_len, int(rng.integers(1, max_len + 1))] for a in axes},
        ),
    ]
    exported = [c for c in cases if c.batch == export_sizes.get("batch") and all(c.sizes[a] == export_sizes.get(a) for a in axes)]
    if exported:
        raise ValueError(f"verification cases {[c.name for c in exported]} repeat the export sizes {export_sizes}")
    return cases


def case_inputs(spec: ExportSpec, model: nn.Module, case: Case, gen: torch.Generator) -> dict[str, Tensor]:
    """CPU tensors for `case`: ids drawn from the vocabulary, pad id where the mask is 0."""
    config = model.config
    pad_id = int(config.get("pad_token_id") or 0)
    masks = {
        a: (torch.arange(case.sizes[a]).unsqueeze(0) < torch.tensor(case.lengths[a]).unsqueeze(1)).long()
        for a in case.sizes
    }  # axis -> [batch, size], 1 = token
    out: dict[str, Tensor] = {}
    for t in spec.inputs:
        if t.name == "memory":  # the decoder's memory is what the encoder makes of a source
            src = case_inputs(specs.SEQ2SEQ_ENCODER, model, case, gen)
            with torch.no_grad():
                out[t.name] = model.encode(src["src_ids"], src["src_attention_mask"])  # [batch, src_seq, d_model]
            continue
        mask = masks[t.shape[1]]
        if t.name.endswith("attention_mask"):
            out[t.name] = mask
        elif t.name == "token_type_ids":  # sentence pairs: a second segment in every row with tokens
            out[t.name] = token_types(mask, gen)
        else:
            vocab = int(config[vocab_key(t.name, config)])
            ids = torch.randint(0, vocab, mask.shape, generator=gen)
            out[t.name] = ids.masked_fill(mask == 0, pad_id)
    return out


# ---- the verifier ------------------------------------------------------------------------------


def available_providers(requested: list[str] | None, report: VerifyReport) -> list[str]:
    """CPU always; CUDA when onnxruntime-gpu and a torch GPU are both present (else a skip line)."""
    if requested:
        missing = [p for p in requested if p not in ort.get_available_providers()]
        if CUDA in requested and not torch.cuda.is_available():
            missing.append("torch CUDA")
        if missing:
            report.add("providers", "FAIL", f"requested {missing} not available (onnxruntime has {ort.get_available_providers()})")
            raise VerificationError(report)
        return list(requested)
    providers = [CPU]
    if CUDA in ort.get_available_providers() and torch.cuda.is_available():
        providers.append(CUDA)
    else:
        why = []
        if CUDA not in ort.get_available_providers():
            why.append("onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)")
        if not torch.cuda.is_available():
            why.append("torch sees no CUDA device")
        report.add("CUDA", "skip", "GPU check skipped: " + "; ".join(why))
    return providers


def make_session(path: str | Path, provider: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if provider == CUDA:
        # TF32 matmuls would blur the comparison; torch's reference runs in full fp32 too.
        providers: list[Any] = [(CUDA, {"use_tf32": 0}), CPU]
    else:
        providers = [CPU]
    session = ort.InferenceSession(str(path), sess_options=options, providers=providers)
    if session.get_providers()[0] != provider:
        raise RuntimeError(f"onnxruntime did not start {provider} (got {session.get_providers()})")
    return session


def check_names(session: ort.InferenceSession, spec: ExportSpec, report: VerifyReport) -> None:
    got_in = [(i.name, i.type) for i in session.get_inputs()]
    got_out = [(o.name, o.type) for o in session.get_outputs()]
    want_in = [(t.name, _ORT_DTYPES[t.dtype]) for t in spec.inputs]
    want_out = [(t.name, _ORT_DTYPES[t.dtype]) for t in spec.outputs]
    if got_in != want_in or got_out != want_out:
        report.add("names", "FAIL", f"inputs {got_in}, outputs {got_out}; expected inputs {want_in}, outputs {want_out}")
        raise VerificationError(report)
    report.add("names", "ok", f"inputs {spec.input_names}, outputs {spec.output_names}")


def check_axes(session: ort.InferenceSession, spec: ExportSpec, config: dict[str, Any], report: VerifyReport) -> None:
    problems = []
    graph = {t.name: t.shape for t in [*session.get_inputs(), *session.get_outputs()]}
    for t in [*spec.inputs, *spec.outputs]:
        dims = graph[t.name]
        if len(dims) != len(t.shape):
            problems.append(f"{t.name} has rank {len(dims)}, expected {len(t.shape)} {list(t.shape)}")
            continue
        for i, (axis, dim) in enumerate(zip(t.shape, dims)):
            if axis in spec.dynamic_axes:
                # Inputs carry the spec's names; outputs may carry the exporter's expression of them.
                if not isinstance(dim, str) or (t in spec.inputs and dim != axis):
                    problems.append(f"{t.name} axis {i} should be dynamic {axis!r}, is {dim!r}")
            elif dim != int(config[axis]):
                problems.append(f"{t.name} axis {i} ({axis}) should be {config[axis]}, is {dim!r}")
    if problems:
        report.add("dynamic axes", "FAIL", "; ".join(problems))
        raise VerificationError(report)
    report.add("dynamic axes", "ok", f"{', '.join(sorted(spec.dynamic_axes))} symbolic on every input and output")


def _argmax_mismatches(ref: np.ndarray, got: np.ndarray, atol: float) -> tuple[int, int]:
    """(mismatches, numerical ties) of argmax over the last axis. A position whose two best
    reference scores are within `atol` is a tie that float32 cannot order: counted, not failed."""
    ref2, got2 = ref.reshape(-1, ref.shape[-1]), got.reshape(-1, got.shape[-1])
    differ = ref2.argmax(-1) != got2.argmax(-1)
    if ref2.shape[-1] < 2:
        return 0, 0
    top2 = np.sort(ref2, axis=-1)[:, -2:]
    tie = (top2[:, 1] - top2[:, 0]) <= atol
    return int((differ & ~tie).sum()), int((differ & tie).sum())


def _run_torch(
    model: nn.Module, spec: ExportSpec, inputs: dict[str, Tensor], device: str, temperature: float = 1.0
) -> list[np.ndarray]:
    from tfm_cls.export.exporter import build_graph

    graph = build_graph(spec, model, temperature)
    with torch.no_grad():
        out = graph(*(inputs[n].to(device) for n in spec.input_names))
    out = out if isinstance(out, tuple) else (out,)
    return [o.float().cpu().numpy() for o in out]


def check_provider(
    model: nn.Module,
    session: ort.InferenceSession,
    spec: ExportSpec,
    cases: list[Case],
    provider: str,
    report: VerifyReport,
    seed: int,
    temperature: float = 1.0,
) -> None:
    """Stages 3 and 4 (shapes, values) on one provider; a classifier's reference scores are those
    of logits / `temperature` (the file's calibration)."""
    atol = spec.tolerances[provider]
    device = "cuda" if provider == CUDA else "cpu"
    reference = model if device == "cpu" else copy.deepcopy(model).to(device)
    short = "CUDA" if provider == CUDA else "CPU"
    gen = torch.Generator().manual_seed(seed)
    results = []
    for case in cases:
        inputs = case_inputs(spec, model, case, gen)
        feeds = {n: inputs[n].numpy() for n in spec.input_names}
        results.append((case, _run_torch(reference, spec, inputs, device, temperature), session.run(spec.output_names, feeds)))

    shape_problems = []
    for case, ref, got in results:
        for t, r, g in zip(spec.outputs, ref, got):
            if g.shape != r.shape:
                shape_problems.append(f"{t.name} {list(g.shape)} != torch {list(r.shape)} ({case.name})")
    if shape_problems:
        report.add(f"output shapes ({short})", "FAIL", "; ".join(shape_problems))
        raise VerificationError(report)
    report.add(f"output shapes ({short})", "ok", f"{len(cases)} cases: " + "; ".join(c.name for c in cases))

    problems, worst, worst_where, positions, ties = [], 0.0, "", 0, 0
    for case, ref, got in results:
        for t, r, g in zip(spec.outputs, ref, got):
            where = f"output {t.name!r}, case '{case.name}', {short}"
            if not np.isfinite(r).all():
                problems.append(f"the PyTorch model itself gives NaN/inf at {where}")
                continue
            if not np.isfinite(g).all():
                rows = sorted({int(i) for i in np.argwhere(~np.isfinite(g))[:, 0]})
                problems.append(f"NaN/inf in rows {rows} at {where}")
                continue
            diff = float(np.abs(r - g).max())
            if diff > worst:
                worst, worst_where = diff, where
            if diff > atol:
                problems.append(f"max abs diff {diff:.3g} > {atol:g} at {where}")
            if t.name in ("logits", "probabilities"):
                bad, tie = _argmax_mismatches(r, g, atol)
                positions += r.size // r.shape[-1]
                ties += tie
                if bad:
                    problems.append(f"argmax differs on {bad} positions at {where}")
    if worst >= report.worst_diff:
        report.worst_diff, report.worst_where = worst, worst_where
    if problems:
        report.add(f"values ({short})", "FAIL", "; ".join(problems) + f"; worst {worst:.3g} at {worst_where}")
        raise VerificationError(report)
    tie_note = f" ({ties} numerical ties within tolerance)" if ties else ""
    report.add(
        f"values ({short})",
        "ok",
        f"all finite; max abs diff {worst:.3g} <= {atol:g} (at {worst_where}); "
        f"argmax identical on {positions} positions{tie_note}",
    )


def check_greedy(
    model: nn.Module, path: Path, spec: ExportSpec, meta: ExportMetadata, provider: str, report: VerifyReport, seed: int
) -> None:
    """Stage 5 (seq2seq): numpy + onnxruntime greedy decoding gives torch's greedy_decode tokens."""
    short = "CUDA" if provider == CUDA else "CPU"
    providers: list[Any] = [(CUDA, {"use_tf32": 0}), CPU] if provider == CUDA else [CPU]
    if spec.task == specs.SEQ2SEQ_DECODER.task:
        encoder = path.parent / (meta.encoder_file or specs.SEQ2SEQ_ENCODER.file_name)
        if not encoder.is_file():
            report.add(f"greedy ({short})", "skip", f"no encoder {encoder} beside the decoder")
            return
        decoder: Any = SplitGreedyDecoder(encoder, path, providers)
        how = "encoder.onnx + decoder.onnx"
    else:
        decoder = MonolithicGreedyDecoder(path, providers)
        how = "monolithic model.onnx"
    bos = 1 if meta.bos_id is None else meta.bos_id
    eos = 2 if meta.eos_id is None else meta.eos_id
    max_len = min(12, int(model.config["max_len"]))
    case = Case("batch 3 with padding and a fully padded row", 3, {"src_sequence": 11}, {"src_sequence": [11, 6, 0]})
    src = case_inputs(specs.SEQ2SEQ_ENCODER, model, case, torch.Generator().manual_seed(seed + 1))
    device = "cuda" if provider == CUDA else "cpu"
    reference = model if device == "cpu" else copy.deepcopy(model).to(device)
    with torch.no_grad():
        want = reference.greedy_decode(
            src["src_ids"].to(device), src["src_attention_mask"].to(device), max_len=max_len, bos_id=bos, eos_id=eos
        ).cpu().numpy()
    got = decoder.greedy_decode(src["src_ids"].numpy(), src["src_attention_mask"].numpy(), max_len, bos, eos)
    if got.shape != want.shape or not np.array_equal(got, want):
        report.add(f"greedy ({short})", "FAIL", f"{how} tokens {got.tolist()} != torch greedy_decode {want.tolist()}")
        raise VerificationError(report)
    report.add(f"greedy ({short})", "ok", f"{how}: identical tokens, shape {list(got.shape)} (bos {bos}, eos {eos})")


def check_metadata(
    props: dict[str, str], path: Path, report: VerifyReport, weights: str | Path | None = None
) -> ExportMetadata:
    """Stage 0: the metadata is ours, parses into ExportMetadata and writes back to the same
    props (every key through the one dataclass), and the file is no stale export of its run."""
    try:
        meta = ExportMetadata.from_props(props, str(path))
    except InferenceError as err:
        report.add("metadata", "FAIL", str(err))
        raise VerificationError(report) from None
    ours = {key: value for key, value in props.items() if key in KEYS}
    written = meta.to_props()
    differ = sorted(k for k in ours.keys() | written.keys() if ours.get(k) != written.get(k))
    if differ:
        report.add("metadata", "FAIL", f"keys {differ} do not round-trip through ExportMetadata")
        raise VerificationError(report)
    if meta.weights_sha256 is None:
        logger.warning("%s records no weights digest (exported by an older tfm_cls); cannot tell if it is stale", path)
    stale = stale_export_problem(meta, path, weights)
    if stale:
        raise StaleExportError(stale)
    report.add("metadata", "ok", f"{len(ours)} tfm_cls keys round-trip" + (", weights digest matches"
                                                                          if meta.weights_sha256 else ""))
    return meta


def verify(
    torch_model: nn.Module,
    onnx_path: str | Path,
    providers: list[str] | None = None,
    *,
    spec: ExportSpec | None = None,
    cases: list[Case] | None = None,
    seed: int = 0,
    name: str | None = None,
    weights: str | Path | None = None,
) -> VerifyReport:
    """Check `onnx_path` against `torch_model` (see the module docstring); returns the report,
    raises VerificationError (carrying it) on the first failing stage. `name`: the file named in
    the report (the export's final name when `onnx_path` is its temporary file).

    `providers`: None = CPU plus CUDA where available (a skip line otherwise); a list = exactly
    those, failing when one is unavailable. `spec`: default from the file's task metadata.
    `weights`: the model.safetensors the file must have been exported from (default: the one
    beside it, if any); a file exported from other weights is a StaleExportError (re-export it).
    """
    path = Path(onnx_path)
    if not path.is_file():
        raise FileNotFoundError(f"ONNX file not found: {path}")
    model = torch_model.eval()
    cpu_session = make_session(path, CPU)
    props = read_props(cpu_session)
    spec = spec or specs.spec_for_task(props.get(specs.TASK_KEY), str(path))
    report = VerifyReport(name or str(path), spec.task)
    meta = check_metadata(props, path, report, weights)
    config = model.config
    check_names(cpu_session, spec, report)
    check_axes(cpu_session, spec, config, report)

    export_sizes = meta.export_sizes or EXPORT_SIZES
    longest = longest_input(config, meta.max_length)  # a wide branch may read past the positions
    cases = cases or default_cases(spec, export_sizes, longest, seed)
    for provider in available_providers(providers, report):
        try:
            session = cpu_session if provider == CPU else make_session(path, provider)
        except RuntimeError as err:  # e.g. the CUDA provider is installed but cannot start
            report.add(provider, "FAIL", str(err))
            raise VerificationError(report) from err
        check_provider(model, session, spec, cases, provider, report, seed, meta.temperature_or_one)
        if spec.task in (specs.SEQ2SEQ.task, specs.SEQ2SEQ_DECODER.task):
            check_greedy(model, path, spec, meta, provider, report, seed)
    return report


def first_failure(report: VerifyReport) -> str:
    """The failed check of a report, in one line."""
    failed = [c for c in report.checks if c.status == "FAIL"]
    return f"{failed[0].name}: {failed[0].detail}" if failed else "no check failed"
