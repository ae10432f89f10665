"""The JS runtime's small rules against Python's own, value by value: what str.strip() calls
empty, round(x, 6) and round(x) (halves to even), and topK's best labels."""

from __future__ import annotations

import json
import math
import random
import subprocess
from pathlib import Path

from kits import web_kit as W

RULES = Path(__file__).with_name("rules.mjs")


def test_empty_rounding_and_top_k_are_pythons(web_dist, web_models, tmp_path):
    rng = random.Random(0)
    chars = [*range(0x3100), *range(0xFEF0, 0x10000), 0x1F600, 0xE0001]
    floats = [rng.random() for _ in range(2000)] + [k / 128 for k in range(129)] + [k / 2**20 for k in range(200)]
    floats += [-x for x in floats[:50]] + [12.3456785, 0.9999995, 5e-7, 1e-9]
    # next to the ties and the halves of the sixth decimal: where round6 leaves its fast path
    floats += [math.nextafter(k / 128, d) for k in range(129) for d in (0, 2)]
    floats += [(rng.randrange(10**7) + 0.5) / 1e6 for _ in range(500)] + [123456.5e-6 * 10**k for k in range(8)]
    halves = [k / 2 for k in range(-20, 40)] + [2.5000000001, 10 * 0.25, 22 * 0.25]
    texts = ["the film was a quiet delight", "", "plot drags in the middle"]
    src, dst = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps({"chars": chars, "floats": floats, "halves": halves, "texts": texts,
                               "model": str(web_models["single_label"])}), encoding="utf-8")
    proc = subprocess.run([W.node(), str(RULES), str(src), str(dst)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(dst.read_text(encoding="utf-8"))
    assert got["empty"] == [not chr(c).strip() for c in chars]
    assert got["round6"] == [round(x, 6) for x in floats]
    assert got["round"] == [round(x) for x in halves]
    rows = got["rows"]
    assert "top" not in rows[1] and rows[1]["empty"]
    for row in (rows[0], rows[2]):
        best = sorted(row["probabilities"].items(), key=lambda kv: -kv[1])[:2]
        assert [t["label"] for t in row["top"]] == [label for label, _ in best]
