"""One table across datasets from the JSON files of benchmarks/bench_distill.py: the issue-14 target
per dataset (the distilled student within 1.5 points of its MiniLM teacher, ahead of the better
TF-IDF baseline and of model2vec, at >= 10x the teacher's int8 texts/s, within 30 minutes of
labelling + training).

    python benchmarks/summarize_distill.py bench_results/distill-sst2-*.json bench_results/distill-trec-*.json

The latest file per dataset wins. Accuracies are the int8 files' (what is deployed); the speed
ratio is the median of the paired passes (`paired` in the JSON) where the run has one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfm_cls.io import read_json  # noqa: E402

GAP, SPEED, BUDGET = 1.5, 10.0, 30.0


def row_of(results: list[dict], system: str) -> dict | None:
    """The first measured row whose system name is `system` or starts with it (model2vec's carries its shape)."""
    return next((r for r in results if str(r.get("system", "")).startswith(system) and "skipped" not in r), None)


def summarize(path: Path) -> dict:
    data = read_json(path)
    results = data["results"]
    teacher, student = row_of(results, "teacher MiniLM (int8)"), row_of(results, "ours distilled (int8)")
    if teacher is None or student is None:
        raise SystemExit(f"{path}: no teacher or distilled int8 row (a bench_distill.py run with --distilled?)")
    tfidf = max((r for r in results if str(r.get("system", "")).startswith("tfidf")), key=lambda r: r["accuracy"])
    m2v = row_of(results, "model2vec")
    paired = data.get("paired") or {}
    ratio = paired.get("median_ratio", student["texts_per_s"] / teacher["texts_per_s"])
    minutes = student.get("train_minutes", 0.0) + student.get("labelling_minutes", 0.0)
    out = {
        "dataset": data["args"]["dataset"], "file": str(path),
        "teacher": 100 * teacher["accuracy"], "student": 100 * student["accuracy"],
        "tfidf": 100 * tfidf["accuracy"], "tfidf_name": tfidf["system"],
        "model2vec": None if m2v is None else 100 * m2v["accuracy"],
        "ratio": ratio, "paired": bool(paired), "student_mb": student["size_mb"], "teacher_mb": teacher["size_mb"],
        "minutes": minutes, "transfer_texts": student.get("transfer_texts"),
    }
    checks = {
        "gap": out["teacher"] - out["student"] <= GAP,
        "tfidf": out["student"] > out["tfidf"],
        "model2vec": out["model2vec"] is None or out["student"] > out["model2vec"],
        "speed": ratio >= SPEED,
        "budget": minutes <= BUDGET,
    }
    out["checks"] = checks
    return out


def markdown(rows: list[dict]) -> str:
    lines = [
        "| dataset | teacher int8 | ours distilled int8 | gap | best TF-IDF | model2vec | x teacher int8 texts/s "
        "| size MB (teacher) | labelling + training min | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        missed = [name for name, ok in r["checks"].items() if not ok]
        m2v = "" if r["model2vec"] is None else f"{r['model2vec']:.1f}"
        lines.append(
            f"| {r['dataset']} | {r['teacher']:.1f} | **{r['student']:.1f}** | {r['student'] - r['teacher']:+.1f} "
            f"| {r['tfidf']:.1f} | {m2v} | {r['ratio']:.1f}x{'' if r['paired'] else ' (unpaired)'} "
            f"| {r['student_mb']:.1f} ({r['teacher_mb']:.1f}) | {r['minutes']:.1f} "
            f"| {'met' if not missed else 'missed: ' + ', '.join(missed)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="distill-<dataset>-<time>.json files of bench_distill.py")
    args = p.parse_args(argv)
    latest: dict[str, dict] = {}
    for path in sorted(args.files, key=lambda f: f.name):  # the time stamp sorts: the latest last
        if "-paired-" in path.name:
            continue
        row = summarize(path)
        latest[row["dataset"]] = row
    print(markdown(list(latest.values())))
    for r in latest.values():
        print(f"{r['dataset']}: {r['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
