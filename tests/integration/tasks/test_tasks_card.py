"""The model card of multi-label and regression runs shows their own metrics (the head's summary)."""

import json

import pytest

from tfm_cls.classify.card import parse_front_matter, render_card


@pytest.mark.parametrize(("fixture", "titles", "absent"), [
    ("ml_run", ["Micro-F1", "Macro-F1", "Subset accuracy", "Loss"], "| Accuracy |"),
    ("reg_run", ["Pearson", "Spearman", "MSE", "Loss"], "| Macro-F1 |"),
])
def test_card_table_and_model_index_use_the_heads_metrics(fixture, titles, absent, request):
    run, _ = request.getfixturevalue(fixture)
    card = render_card(run)
    metrics = json.loads((run / "metrics.json").read_text())
    lines = card.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| metric |")) + 2  # header, |---|
    rows = lines[start : start + len(titles)]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == titles
    assert absent not in card
    first = titles[0].lower().replace("-", "_").replace(" ", "_")
    assert f"{metrics['validation'][first]:.4f}" in card
    index = parse_front_matter(card)["model-index"][0]["results"]
    assert [m["name"] for m in index[0]["metrics"]] == [f"validation {t}" for t in titles]
