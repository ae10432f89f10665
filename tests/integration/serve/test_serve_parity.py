"""Served scores equal `tfm-cls infer` on the same texts (max |diff| <= 1e-6) for a single-label,
a multi-label, a sentence-pair and a chunked long-text model: one code path (Classifier)."""

from __future__ import annotations

import pytest
from kits import serve_kit as K


@pytest.mark.parametrize("kind", ["single_label", "multi_label", "pair", "chunked"])
def test_served_scores_equal_tfm_cls_infer(clients, models, kind, tmp_path):
    pair = kind == "pair"
    texts = K.TEXTS
    rows = K.infer_rows(models[kind], texts, K.PAIRS if pair else None, tmp_path)
    inputs = [[t, p] for t, p in zip(texts, K.PAIRS)] if pair else texts
    served = []
    for start in range(0, len(inputs), 16):
        r = clients[kind].post("/predict", json={"inputs": inputs[start:start + 16], "truncate": True})
        assert r.status_code == 200, r.text
        served += r.json()
    worst = 0.0
    for row, entries in zip(rows, served):
        got = {e["label"]: e["score"] for e in entries}
        assert set(got) == set(row["probabilities"])
        worst = max(worst, *(abs(got[k] - v) for k, v in row["probabilities"].items()))
    assert worst <= 1e-6, worst
    classified = clients[kind].post("/classify", json={"inputs": inputs[:16], "truncate": True}).json()
    keys = [k for k in rows[0] if k not in ("id", "line", "empty")]
    for row, got in zip(rows, classified):
        assert {k: got[k] for k in keys if k not in ("probabilities", "score", "scores")} == \
               {k: row[k] for k in keys if k not in ("probabilities", "score", "scores")}
    if kind == "chunked":
        assert max(r["windows"] for r in rows) > 1  # the texts really are windowed
    if kind in ("single_label", "pair"):
        assert any(r["truncated"] for r in rows)  # and some really are cut
