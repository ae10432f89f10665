"""benchmarks/accuracy.py, the ours+mlm column: which datasets' training texts become extra MLM
text (--mlm-extra)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import accuracy as bench_mlm


@pytest.fixture()
def data_root(tmp_path: Path) -> Path:
    for name in ("sst2", "trec", "mr_polarity", "sms_spam", "tnews"):  # no ag_news: absent folders are skipped
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.jsonl").write_text(json.dumps({"text": "a text", "label": 0}) + "\n")
    return tmp_path


def test_auto_takes_every_other_dataset_of_the_same_language(data_root: Path) -> None:
    assert bench_mlm.extra_datasets("trec", "auto", data_root) == ["sst2", "mr_polarity", "sms_spam"]
    # sst2 and mr_polarity share source sentences: the pretraining overlap guard drops the pieces
    # (tests/unit/pretrain/test_corpus.py), so the pair is allowed here.
    assert bench_mlm.extra_datasets("mr_polarity", "auto", data_root) == ["sst2", "trec", "sms_spam"]
    assert bench_mlm.extra_datasets("tnews", "auto", data_root) == []  # no other Chinese dataset
    assert bench_mlm.extra_datasets("trec", "none", data_root) == []


def test_an_explicit_list_keeps_its_order_and_skips_the_dataset_itself_and_absent_folders(data_root: Path) -> None:
    assert bench_mlm.extra_datasets("sst2", "trec, sms_spam,sst2,ag_news", data_root) == ["trec", "sms_spam"]
