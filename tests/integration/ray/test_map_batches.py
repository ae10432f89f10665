"""OnnxClassifier used directly, as the issue shows it: `ds.map_batches(OnnxClassifier,
fn_constructor_kwargs={"model": path}, concurrency=N, batch_size=B)`, on the session's Ray."""

from __future__ import annotations

import pytest
from kits import ray_kit as R
from kits import serve_kit as K

from tfm_cls.runtime.ray_predictor import OnnxClassifier


@pytest.mark.parametrize("batch_format", ["pandas", "pyarrow"])
def test_map_batches_gives_infer_rows_with_the_input_columns(ray_cluster, models, batch_format, cwd_tmp):
    import ray.data

    items = [{"id": str(i + 1), "text": t, "source": f"doc{i}"} for i, t in enumerate(K.TEXTS)]
    items[5]["text"] = None  # a null text: an empty row, not a dropped one
    ds = ray.data.from_items(items, override_num_blocks=2).map_batches(
        OnnxClassifier, fn_constructor_kwargs={"model": str(models["multi_label"])}, concurrency=2, batch_size=8,
        batch_format=batch_format, num_cpus=1)
    rows = ds.take_all()
    assert sorted(r["id"] for r in rows) == sorted(i["id"] for i in items)
    assert {r["id"]: r["source"] for r in rows} == {i["id"]: i["source"] for i in items}
    null = next(r for r in rows if r["id"] == "6")
    assert null["empty"] and null["labels"] is None
    expected = K.infer_rows(models["multi_label"], [i["text"] or "" for i in items], None, cwd_tmp)
    assert R.mismatches([{k: v for k, v in e.items() if k != "line"} for e in expected], rows) == []
