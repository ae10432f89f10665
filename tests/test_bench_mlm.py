"""benchmarks/bench_mlm.py: which datasets' texts may be extra MLM text for which (test-text leaks)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench_mlm():
    spec = importlib.util.spec_from_file_location("bench_mlm", ROOT / "benchmarks" / "bench_mlm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def data_root(tmp_path: Path) -> Path:
    for name in ("sst2", "trec", "mr_polarity", "sms_spam", "tnews"):  # no ag_news: absent folders are skipped
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.jsonl").write_text(json.dumps({"text": "a text", "label": 0}) + "\n")
    return tmp_path


def test_auto_takes_other_datasets_of_the_same_language_but_never_a_shared_source(data_root: Path) -> None:
    bench_mlm = _bench_mlm()
    assert bench_mlm.extra_datasets("trec", "auto", data_root) == ["sst2", "mr_polarity", "sms_spam"]
    # SST-2 phrases are pieces of Rotten Tomatoes sentences, MR's test sentences among them.
    assert bench_mlm.extra_datasets("sst2", "auto", data_root) == ["trec", "sms_spam"]
    assert bench_mlm.extra_datasets("mr_polarity", "auto", data_root) == ["trec", "sms_spam"]
    assert bench_mlm.extra_datasets("tnews", "auto", data_root) == []  # no other Chinese dataset
    assert bench_mlm.extra_datasets("trec", "none", data_root) == []


def test_an_explicit_list_that_would_leak_test_text_is_refused(data_root: Path) -> None:
    bench_mlm = _bench_mlm()
    assert bench_mlm.extra_datasets("sst2", "trec,sms_spam,sst2", data_root) == ["trec", "sms_spam"]
    with pytest.raises(ValueError, match=r"mr_polarity.*share source sentences with sst2"):
        bench_mlm.extra_datasets("sst2", "trec,mr_polarity", data_root)
