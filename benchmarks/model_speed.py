"""Model speed: our TransformerEncoder vs torch.nn.TransformerEncoder with the same weights, side by side.

For each case (shape x architecture) it measures, alternating ours and torch's on every repeat so
both see the same machine load:
  * training step (forward + backward), tokens/s over real (non-pad) tokens, median of N;
  * inference latency (eval, inference_mode; torch's fast path on), median of 2N, ms;
and reports ours/torch ratios and achieved GFLOP/s against this machine's fp32 GEMM peak,
measured here with a large torch.matmul. FLOPs count useful work only (non-pad tokens).

    python -m benchmarks.model_speed            # full (~2-3 min on 2 idle cores)
    python -m benchmarks.model_speed --quick    # smoke run, seconds
    python -m benchmarks.model_speed --threads 1  # steadier when others share the CPU
Writes bench_results/model-speed-<time>.json.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn

from benchmarks.harness.results import OUT, Results
from benchmarks.harness.timing import paired_rounds
from tfm_cls.model import TransformerEncoder, TransformerEncoderLayer

D_MODEL, NHEAD, NUM_LAYERS, DIM_FF = 256, 4, 4, 1024


def measure_gemm_peak(n: int, repeats: int) -> float:
    """fp32 GFLOP/s of an n x n x n matmul (best of `repeats`)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def encoder_flops(lengths: list[int], training: bool) -> float:
    """Forward FLOPs (x3 for forward + backward) of the encoder over the real tokens only."""
    d, f = D_MODEL, DIM_FF
    per_token = 2 * (4 * d * d + 2 * d * f)  # QKV + out projection, two FFN matmuls
    total = 0.0
    for n in lengths:
        total += n * per_token + 2 * 2 * n * n * d  # + QK^T and attention @ V
    total *= NUM_LAYERS
    return 3 * total if training else total


def build_pair(norm_first: bool, activation: str) -> tuple[nn.Module, nn.Module]:
    kwargs = dict(
        d_model=D_MODEL,
        nhead=NHEAD,
        dim_feedforward=DIM_FF,
        dropout=0.0,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that nested tensors are off for pre-norm
        ref = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**kwargs), NUM_LAYERS, nn.LayerNorm(D_MODEL), enable_nested_tensor=True
        )
    ours = TransformerEncoder(TransformerEncoderLayer(**kwargs), NUM_LAYERS, nn.LayerNorm(D_MODEL))
    ours.load_state_dict(ref.state_dict(), strict=True)
    return ours, ref


def make_batch(batch: int, seq_len: int, padded: bool, generator: torch.Generator):
    """x [B, T, D] and key padding mask [B, T] (True = pad), lengths uniform in [T/8, T]."""
    x = torch.randn(batch, seq_len, D_MODEL, generator=generator)
    if not padded:
        return x, None, [seq_len] * batch
    lengths = torch.randint(seq_len // 8, seq_len + 1, (batch,), generator=generator)
    lengths[0] = seq_len  # the longest sequence sets the padded length, as a data loader would
    padding = torch.arange(seq_len).unsqueeze(0) >= lengths.unsqueeze(1)
    return x, padding, lengths.tolist()


def train_step(model: nn.Module, x: torch.Tensor, padding: torch.Tensor | None) -> None:
    model.zero_grad(set_to_none=True)
    out = model(x, src_key_padding_mask=padding)  # [B, T, D]
    keep = out if padding is None else out[~padding]
    keep.square().mean().backward()


def infer(model: nn.Module, x: torch.Tensor, padding: torch.Tensor | None) -> None:
    with torch.inference_mode():
        model(x, src_key_padding_mask=padding)


def time_pair(fn, ours, ref, repeats: int, warmup: int) -> tuple[float, float, float]:
    """Ours and torch's median seconds a call, alternating each repeat (paired rounds), and the
    ratio of their fastest calls (torch / ours: less sensitive to the machine's load)."""
    rounds = paired_rounds({"ours": lambda: fn(ours), "torch": lambda: fn(ref)}, repeats, warmup=warmup)
    return rounds.median("ours"), rounds.median("torch"), min(rounds.wall["torch"]) / min(rounds.wall["ours"])


def run_case(name, batch, seq_len, padded, norm_first, activation, repeats, peak):
    torch.manual_seed(0)
    ours, ref = build_pair(norm_first, activation)
    gen = torch.Generator().manual_seed(0)
    x, padding, lengths = make_batch(batch, seq_len, padded, gen)
    tokens = sum(lengths)

    ours.train()
    ref.train()
    train_ours, train_ref, train_best = time_pair(lambda m: train_step(m, x, padding), ours, ref, repeats, warmup=1)

    ours.eval()
    ref.eval()
    inf_ours, inf_ref, inf_best = time_pair(lambda m: infer(m, x, padding), ours, ref, repeats * 2, warmup=2)

    # the two must agree where it matters before the numbers mean anything
    with torch.inference_mode():
        a, b = ours(x, src_key_padding_mask=padding), ref(x, src_key_padding_mask=padding)
        diff = (a - b).abs().max() if padding is None else (a[~padding] - b[~padding]).abs().max()

    f_train, f_inf = encoder_flops(lengths, True), encoder_flops(lengths, False)
    return {
        "case": name,
        "batch": batch,
        "seq_len": seq_len,
        "real_tokens": tokens,
        "padding_fraction": round(1 - tokens / (batch * seq_len), 3),
        "norm_first": norm_first,
        "activation": activation,
        "train_tokens_per_s": {"ours": tokens / train_ours, "torch": tokens / train_ref},
        "train_ratio": train_ref / train_ours,  # throughput ours / torch, from the medians
        "train_ratio_best": train_best,  # from the fastest repeat of each: less sensitive to machine load
        "train_gflops": {"ours": f_train / train_ours / 1e9, "torch": f_train / train_ref / 1e9},
        "infer_ms": {"ours": inf_ours * 1e3, "torch": inf_ref * 1e3},
        "infer_ratio": inf_ref / inf_ours,  # speed ours / torch (>1 = ours faster), from the medians
        "infer_ratio_best": inf_best,
        "infer_gflops": {"ours": f_inf / inf_ours / 1e9, "torch": f_inf / inf_ref / 1e9},
        "peak_fraction": {"train_ours": f_train / train_ours / 1e9 / peak, "infer_ours": f_inf / inf_ours / 1e9 / peak},
        "max_abs_diff": float(diff),
        "repeats": {"train": repeats, "infer": repeats * 2},
    }


def print_table(results: list[dict], peak: float) -> None:
    print(f"\nfp32 GEMM peak (torch.matmul): {peak:.1f} GFLOP/s, threads={torch.get_num_threads()}")
    header = (
        f"{'case':<34} {'pad':>5} | {'train tok/s ours':>16} {'torch':>9} {'ratio':>6} {'best':>6} {'GF/s':>6} | "
        f"{'infer ms ours':>13} {'torch':>8} {'ratio':>6} {'best':>6} {'GF/s':>6} | {'%peak tr/inf':>12} {'maxdiff':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['case']:<34} {r['padding_fraction']:>5.2f} | "
            f"{r['train_tokens_per_s']['ours']:>16,.0f} {r['train_tokens_per_s']['torch']:>9,.0f} "
            f"{r['train_ratio']:>5.2f}x {r['train_ratio_best']:>5.2f}x {r['train_gflops']['ours']:>6.1f} | "
            f"{r['infer_ms']['ours']:>13.2f} {r['infer_ms']['torch']:>8.2f} {r['infer_ratio']:>5.2f}x "
            f"{r['infer_ratio_best']:>5.2f}x "
            f"{r['infer_gflops']['ours']:>6.1f} | "
            f"{100 * r['peak_fraction']['train_ours']:>5.0f}/{100 * r['peak_fraction']['infer_ours']:<5.0f}% "
            f"{r['max_abs_diff']:>8.1e}"
        )
    print(
        "ratio = ours / torch throughput from the medians (> 1: ours faster); best = from each side's fastest "
        "repeat. GF/s = useful (non-pad) GFLOP/s of ours. Targets: train >= 1.0x, inference >= 0.9x."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.model_speed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: small batch, 2 repeats")
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed training steps for the large batch (inference: 2x; the batch-1 cases, which are ~50x "
        "cheaper, 6x as many). Default 5, --quick 2",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice; 1 is steadier on a busy machine)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    args = parser.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")
    repeats = args.repeats or (2 if args.quick else 5)
    peak = measure_gemm_peak(1024 if args.quick else 2048, 3 if args.quick else 5)
    big_batch, big_len = (4, 64) if args.quick else (32, 128)
    cases = []
    for norm_first, activation in ((False, "relu"), (True, "gelu")):
        arch = "pre-norm gelu" if norm_first else "post-norm relu"
        cases.append((f"B{big_batch} T{big_len} padded, {arch}", big_batch, big_len, True, norm_first, activation, repeats))
        cases.append((f"B1 T64, {arch}", 1, 64, False, norm_first, activation, 6 * repeats))

    results = []
    for case in cases:
        results.append(run_case(*case, peak=peak))
        print(f"done: {case[0]}", file=sys.stderr)
    print_table(results, peak)

    payload = {
        "benchmark": "bench_model",
        "quick": args.quick,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "gemm_peak_gflops": peak,
        "model": {"d_model": D_MODEL, "nhead": NHEAD, "num_layers": NUM_LAYERS, "dim_feedforward": DIM_FF},
        "results": results,
    }
    print(f"saved {Results(args.out, 'model-speed', args.quick).write(payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
