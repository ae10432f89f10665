"""One prepared check for a machine with an NVIDIA GPU (`make check-gpu`), a few minutes end to end.

    python tests/integration/device/check_gpu.py --data-root ../shared/data [--dataset trec] [--minutes 2] [--output FILE]
    python tests/integration/device/check_gpu.py --cpu-dry-run --data-root DIR     # every step on CPU, tiny, seconds

Steps, in order:
  1. preflight   torch sees a CUDA GPU; onnxruntime has CUDAExecutionProvider and can start it
                 (else: exit 2 with one line, before any GPU minute is spent);
  2. train       a short classifier training on a real dataset (bf16 autocast, train.max_minutes);
  3. attention   which scaled_dot_product_attention kernels (flash, memory-efficient, cuDNN, math)
                 run the trained model on a padded batch (the encoder's packed path, additive
                 mask) and on an unpadded one, forward and backward, each against the math kernel;
  4. export      the classifier of that run and a small random Seq2SeqTransformer to ONNX, each
                 verified by tfm_cls.export.verify.verify on CPUExecutionProvider and CUDAExecutionProvider
                 against PyTorch on CUDA;
  5. timing      torch eager fp32 and bf16 autocast (packed, and dense: attention and FFN over the
                 padded grid) vs onnxruntime CUDA at batch 1 and 32 on real test texts, host
                 arrays in and out (the copies are part of what a caller pays).
A table goes to stdout, everything to --output (JSON). Exit 0 when every check passed, 1 when a
check failed (the JSON says which), 2 when the machine cannot run the check at all.

--cpu-dry-run runs the same code on CPU with CPUExecutionProvider and a tiny budget, so every code
path is exercised without a GPU. --torch-only skips the onnxruntime CUDA parts (verification and
timing then use CPUExecutionProvider) for machines without onnxruntime-gpu.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

log = logging.getLogger("check_gpu")

CPU_EP, CUDA_EP = "CPUExecutionProvider", "CUDAExecutionProvider"
BATCHES = (1, 32)


class CheckError(Exception):
    """The machine cannot run this check; the message is the one line printed."""


@dataclass
class Plan:
    """What this invocation runs on."""

    dry_run: bool
    device: str  # torch device: "cuda" or "cpu"
    ort_provider: str  # provider verified besides CPU and timed
    train_precision: str
    minutes: float | None
    repeats: int
    warmup: int

    @property
    def verify_providers(self) -> list[str]:
        return [CPU_EP] if self.ort_provider == CPU_EP else [CPU_EP, self.ort_provider]


# ---- 1. preflight ------------------------------------------------------------------------------


def preflight(dry_run: bool, torch_only: bool) -> dict[str, Any]:
    """Versions and devices; CheckError (one line) when the GPU or its onnxruntime provider is missing."""
    try:
        import onnxruntime as ort
        import tfm_cls.export.verify  # noqa: F401  (the whole pipeline imports: datasets, onnxscript, ...)
        import torch

        import tfm_cls.train.recipe  # noqa: F401
    except ModuleNotFoundError as err:
        raise CheckError(f"missing Python package {err.name!r}: install the project (pip install -e .)") from err
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "onnxruntime": ort.__version__,
        "ort_providers": ort.get_available_providers(),
    }
    if dry_run:
        return info
    if not torch.cuda.is_available():
        raise CheckError(
            f"no CUDA GPU visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); "
            "run on a machine with an NVIDIA GPU, or use --cpu-dry-run"
        )
    info["gpu"] = torch.cuda.get_device_name(0)
    info["gpu_capability"] = list(torch.cuda.get_device_capability(0))
    if torch_only:
        return info
    if CUDA_EP not in ort.get_available_providers():
        raise CheckError(
            f"onnxruntime {ort.__version__} has no {CUDA_EP} (it has {ort.get_available_providers()}): "
            "install onnxruntime-gpu built for this CUDA, or pass --torch-only"
        )
    try:
        started = _start_cuda_provider()
    except Exception as err:  # onnxruntime raises its own types when a CUDA library fails to load
        raise CheckError(f"onnxruntime {ort.__version__} could not start {CUDA_EP}: {str(err).splitlines()[0]}") from err
    if started != CUDA_EP:
        raise CheckError(
            f"onnxruntime {ort.__version__} lists {CUDA_EP} but fell back to {started} "
            "(a CUDA/cuDNN library of the version it was built for is missing)"
        )
    return info


def _start_cuda_provider() -> str:
    """Start a session of a one-node graph on CUDA; returns the provider that actually runs it."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])], "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=[CUDA_EP, CPU_EP],
    )
    return session.get_providers()[0]


# ---- 2. training ---------------------------------------------------------------------------------


def find_dataset(data_root: Path, name: str) -> Path:
    folder = data_root / name
    if not (folder / "train.jsonl").is_file():
        raise CheckError(f"dataset {folder} not found (expected {folder / 'train.jsonl'}); pass --data-root / --dataset")
    return folder


def train_overrides(plan: Plan, data_dir: Path, run_dir: Path, max_train_samples: int | None) -> list[str]:
    """A short run: a mid-sized model on the GPU; a tiny one, a few steps, for the dry run."""
    common = [
        f"data.path={data_dir}", f"run_dir={run_dir}", "name=check-gpu", "seed=0",
        f"train.device={plan.device}", f"train.precision={plan.train_precision}", "train.progress=false",
        "tokenizer.min_frequency=1",
    ]
    if max_train_samples:
        common.append(f"data.max_train_samples={max_train_samples}")
    if plan.dry_run:
        return [
            *common, "tokenizer.vocab_size=300", "tokenizer.max_length=32", "model.d_model=32", "model.nhead=4",
            "model.num_layers=1", "model.dim_feedforward=64", "model.max_len=64", "train.max_steps=4",
            "train.batch_size=16", "train.eval_batch_size=64", "train.warmup_steps=1", "train.log_every=2",
        ]
    return [
        *common, "tokenizer.vocab_size=8000", "tokenizer.max_length=64", "model.d_model=256", "model.nhead=4",
        "model.num_layers=4", "model.dim_feedforward=1024", "model.max_len=128", "train.epochs=1000",
        f"train.max_minutes={plan.minutes}", "train.batch_size=64", "train.eval_batch_size=256", "train.lr=1e-3",
        "train.eval_every=200", "train.checkpoint_every=1000", "train.log_every=100", "train.num_workers=2",
    ]


def run_training(plan: Plan, data_dir: Path, run_dir: Path, max_train_samples: int | None) -> dict[str, Any]:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.train import train

    cfg = load_config(ClassifierConfig, None, train_overrides(plan, data_dir, run_dir, max_train_samples))
    log.info("training on %s (%s, %s) into %s", data_dir.name, plan.device, plan.train_precision, run_dir)
    start = time.perf_counter()
    metrics = train(cfg, overwrite=True)
    return {
        "dataset": data_dir.name,
        "wall_seconds": time.perf_counter() - start,
        "steps": metrics["steps"],
        "stopped": metrics["stopped"],
        "train_seconds": metrics["train_seconds"],
        "train_tokens_per_second": metrics["train_tokens_per_second"],
        "num_parameters": metrics["num_parameters"],
        "validation_accuracy": metrics["validation"]["accuracy"],
        "test_accuracy": metrics["test"]["accuracy"],
        "test_macro_f1": metrics["test"]["macro_f1"],
        "test_examples": metrics["test"]["examples"],
    }


# ---- inputs from real texts ---------------------------------------------------------------------


def read_texts(data_dir: Path, limit: int) -> list[str]:
    for split in ("test", "validation", "train"):
        path = data_dir / f"{split}.jsonl"
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                return [json.loads(line)["text"] for _, line in zip(range(limit), f)]
    raise CheckError(f"{data_dir}: no test/validation/train .jsonl to take texts from")


def text_batch(tokenizer: Any, texts: list[str], batch: int) -> tuple[np.ndarray, np.ndarray]:
    """ids, attention_mask [batch, longest] int64 of the first `batch` texts (real padding)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer.to_str())
    tokenizer.no_padding()  # padded here, to this batch's longest text
    encodings = [e.ids for e in tokenizer.encode_batch(texts[:batch])]
    width = max(len(e) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)  # [batch, seq]
    mask = np.zeros((len(encodings), width), dtype=np.int64)  # [batch, seq]
    for row, e in enumerate(encodings):
        ids[row, : len(e)], mask[row, : len(e)] = e, 1
    return ids, mask


# ---- 3. attention kernels --------------------------------------------------------------------------


def attention_kernels(model: Any, inputs: dict[str, tuple[np.ndarray, np.ndarray]], device: str, dtype: Any) -> dict:
    """For each named batch and each SDPA backend alone: does forward + backward run, and how far
    are the logits from the math kernel's? A backend that cannot take the inputs raises."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    model = model.to(device).eval()
    results: dict[str, Any] = {}
    for batch_name, (ids_np, mask_np) in inputs.items():
        ids, mask = torch.from_numpy(ids_np).to(device), torch.from_numpy(mask_np).to(device)
        outputs, rows = {}, {}
        for name, backend in backends.items():
            try:
                with sdpa_kernel([backend]), torch.autocast(device, dtype=dtype, enabled=dtype is not None):
                    logits = model(ids, mask)  # [B, C]
                    logits.float().sum().backward()
                outputs[name] = logits.detach().float()
                rows[name] = {"ok": True}
            except RuntimeError as err:
                rows[name] = {"ok": False, "error": str(err).strip().splitlines()[0][:200]}
            model.zero_grad(set_to_none=True)
        for name, out in outputs.items():
            if "math" in outputs and name != "math":
                rows[name]["max_abs_diff_vs_math"] = float((out - outputs["math"]).abs().max())
        fused = [n for n in ("flash", "efficient", "cudnn") if rows[n]["ok"]]
        results[batch_name] = {"shape": list(ids_np.shape), "padded": bool((mask_np == 0).any()),
                               "backends": rows, "fused_usable": fused}
    return results


# ---- 4. export and verification ------------------------------------------------------------------


def export_and_verify(run_dir: Path, work_dir: Path, plan: Plan) -> dict[str, Any]:
    """Classifier of the run + a random Seq2SeqTransformer, each file through the one verifier."""
    import torch
    from tfm_cls.export.exporter import export_run, export_seq2seq
    from tfm_cls.export.verify import VerificationError, verify

    from tfm_cls.model import Seq2SeqTransformer
    from tfm_cls.runs import load_run

    results: dict[str, Any] = {}

    def check(name: str, model: Any, path: Path) -> None:
        start = time.perf_counter()
        try:
            report = verify(model, path, plan.verify_providers)
            results[name] = {"ok": True, "report": str(report)}
        except VerificationError as err:
            results[name] = {"ok": False, "report": str(err)}
        results[name]["seconds"] = time.perf_counter() - start  # verify logged the report

    start = time.perf_counter()
    path = export_run(run_dir, work_dir / "classifier.onnx")
    results["export_seconds_classifier"] = time.perf_counter() - start
    check("classifier", load_run(run_dir).model, path)

    torch.manual_seed(0)
    seq2seq = Seq2SeqTransformer(
        src_vocab_size=300, tgt_vocab_size=280, d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
        dim_feedforward=128, dropout=0.0, max_len=64,
    ).eval()
    start = time.perf_counter()
    paths = export_seq2seq(seq2seq, work_dir / "seq2seq", bos_id=1, eos_id=2)
    results["export_seconds_seq2seq"] = time.perf_counter() - start
    for task, p in paths.items():
        check(task, seq2seq, p)
    return results


# ---- 5. timing ---------------------------------------------------------------------------------------


def median_ms(run: Callable[[], Any], repeats: int, warmup: int) -> dict[str, float]:
    """Median and p90 wall time of `run` (which returns host data, so the device is synchronised)."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return {"median_ms": 1000 * statistics.median(times), "p90_ms": 1000 * float(np.percentile(times, 90)),
            "runs": repeats}


def time_inference(model: Any, onnx_path: Path, batches: dict[int, tuple[np.ndarray, np.ndarray]], plan: Plan) -> list[dict]:
    import torch
    from tfm_cls.export.verify import make_session

    device = torch.device(plan.device)
    model = model.to(device).eval()
    dense = copy.deepcopy(model)
    dense.encoder.enable_packing = False  # attention over the padded grid, no skipping of padding
    session = make_session(onnx_path, plan.ort_provider)

    def torch_runner(ids: np.ndarray, mask: np.ndarray, dtype: Any, model: Any = model) -> Callable[[], Any]:
        def run() -> np.ndarray:
            with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                logits = model(torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device))
            return logits.float().cpu().numpy()

        return run

    rows = []
    for ids, mask in batches.values():
        batch = int(ids.shape[0])
        engines = {
            f"torch eager fp32 ({device.type})": torch_runner(ids, mask, None),
            f"torch eager bf16 ({device.type})": torch_runner(ids, mask, torch.bfloat16),
            f"torch eager bf16, dense ({device.type})": torch_runner(ids, mask, torch.bfloat16, dense),
            f"onnxruntime {plan.ort_provider.replace('ExecutionProvider', '')}":
                lambda ids=ids, mask=mask: session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0],
        }
        base = None
        for name, run in engines.items():
            t = median_ms(run, plan.repeats, plan.warmup)
            base = base or t["median_ms"]
            rows.append({"engine": name, "batch": batch, "seq": int(ids.shape[1]), **t,
                         "texts_per_s": batch / (t["median_ms"] / 1000), "speedup_vs_fp32": base / t["median_ms"]})
    return rows


def render_table(rows: list[dict]) -> str:
    lines = ["| engine | batch | seq | median ms | p90 ms | texts/s | vs torch fp32 |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['batch']} | {r['seq']} | {r['median_ms']:.3f} | {r['p90_ms']:.3f} | "
            f"{r['texts_per_s']:,.0f} | {r['speedup_vs_fp32']:.2f}x |"
        )
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------------------


def make_plan(args: argparse.Namespace) -> Plan:
    if args.cpu_dry_run:
        return Plan(dry_run=True, device="cpu", ort_provider=CPU_EP, train_precision="bf16", minutes=None,
                    repeats=2, warmup=1)
    return Plan(dry_run=False, device="cuda", ort_provider=CPU_EP if args.torch_only else CUDA_EP,
                train_precision="bf16", minutes=args.minutes, repeats=args.repeats, warmup=10)


def failures(results: dict[str, Any]) -> list[str]:
    """The checks that failed, one phrase each."""
    out = [f"verification of {name}" for name, r in results["verify"].items() if isinstance(r, dict) and not r["ok"]]
    padded = results["attention"].get("padded batch", {})
    if padded and not results["plan"]["dry_run"] and not padded["fused_usable"]:
        out.append("no fused attention kernel runs the padded (packed) batch on CUDA")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    parser.add_argument("--dataset", default="sst2", help="folder under --data-root (train/test .jsonl); sst2's "
                        "67k texts give epochs long enough that per-epoch checkpoints do not dominate on a GPU")
    parser.add_argument("--max-train-samples", type=int, help="subsample the training split (e.g. 20000 for sst2)")
    parser.add_argument("--minutes", type=float, default=2.0, help="training budget (train.max_minutes)")
    parser.add_argument("--repeats", type=int, default=50, help="timed runs per engine and batch size")
    parser.add_argument("--output", type=Path, help="JSON results (default bench_results/check_gpu[_dry_run].json)")
    parser.add_argument("--work-dir", type=Path, help="run directory and ONNX files (default: a temporary folder)")
    parser.add_argument("--cpu-dry-run", action="store_true", help="every step on CPU with a tiny budget")
    parser.add_argument("--torch-only", action="store_true", help="no onnxruntime CUDA (verify and time on its CPU provider)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    plan = make_plan(args)
    output = args.output or Path("bench_results") / ("check_gpu_dry_run.json" if plan.dry_run else "check_gpu.json")
    try:
        info = preflight(plan.dry_run, args.torch_only)
        data_dir = find_dataset(args.data_root, args.dataset)
    except CheckError as err:
        print(f"check-gpu: cannot run: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="check_gpu_") as tmp:
        work_dir = args.work_dir or Path(tmp)
        results = run_all(plan, data_dir, work_dir, args.max_train_samples, info)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render_table(results["timing"]))
    failed = failures(results)
    print(f"check-gpu: {'FAILED: ' + '; '.join(failed) if failed else 'all checks passed'} (details: {output})")
    return 1 if failed else 0


def run_all(plan: Plan, data_dir: Path, work_dir: Path, max_train_samples: int | None, info: dict) -> dict[str, Any]:
    import torch

    from tfm_cls.runs import load_run

    results: dict[str, Any] = {"plan": vars(plan) | {"verify_providers": plan.verify_providers}, "machine": info}
    results["train"] = run_training(plan, data_dir, work_dir / "run", max_train_samples)
    run = load_run(work_dir / "run")
    texts = read_texts(data_dir, max(BATCHES))
    batches = {b: text_batch(run.tokenizer, texts, b) for b in BATCHES}
    inputs = {"padded batch": batches[max(BATCHES)], "unpadded batch": batches[1]}
    results["attention"] = attention_kernels(load_run(work_dir / "run").model, inputs, plan.device, torch.bfloat16)
    results["verify"] = export_and_verify(work_dir / "run", work_dir, plan)
    results["timing"] = time_inference(run.model, work_dir / "classifier.onnx", batches, plan)
    if plan.device == "cuda":
        results["machine"]["max_memory_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return results


if __name__ == "__main__":
    sys.exit(main())
