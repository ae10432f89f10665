"""The tokenize share: past it (timed on a probe of the texts at hand) the run trains on a seeded sample,
recorded as data.max_train_samples and said in the clock's shrunk; a resumed run takes the same sample."""

import dataclasses
import time

from datasets import Dataset, DatasetDict

from tfm_cls.config import ClassifierConfig
from tfm_cls.data.sources import ClassificationData
from tfm_cls.data.tokenizer import TokenizerConfig, train_tokenizer
from tfm_cls.train import recipe
from tfm_cls.training import budget
from tfm_cls.training.clock import WallClock


def _data(n):
    texts = [f"text {i} about {'cats' if i % 2 else 'dogs'} and more words {i % 13}" for i in range(n)]
    train = Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(n)]})
    return ClassificationData(DatasetDict({"train": train, "validation": train.select(range(20))}), ["a", "b"],
                              "made here", [])


def test_a_split_too_long_to_tokenize_in_its_share_is_sampled_before_it_is(monkeypatch, tmp_path):
    data = _data(3000)
    tokenizer = train_tokenizer(data.splits["train"]["text"][:200], TokenizerConfig(vocab_size=120, min_frequency=1,
                                                                                    max_length=16))
    cfg = ClassifierConfig()
    monkeypatch.setattr(recipe, "TOKENIZE_BLOCK", 500)
    monkeypatch.setattr(budget, "TOKENIZE_PROBE", 400)
    # without a budget, or with all of it affordable, nothing changes
    assert recipe._rows_in_budget(cfg, data, tokenizer, None, WallClock(None)) == (cfg, data)
    assert recipe._rows_in_budget(cfg, data, tokenizer, None, WallClock(600.0))[0] is cfg
    # a share of about 1,000 texts' tokenizing: a sample, at least TOKENIZE_BLOCK texts, seeded, said
    per_text = []
    real = recipe.tokenize_dataset

    def timed(ds, *args):
        started = time.monotonic()
        out = real(ds, *args)
        per_text.append((time.monotonic() - started, len(ds)))
        return out

    monkeypatch.setattr(recipe, "tokenize_dataset", timed)
    clock = WallClock(1.0)
    monkeypatch.setattr(budget, "TOKENIZE_SHARE", 1e-9)  # nothing fits: the floor, TOKENIZE_BLOCK texts
    sampled_cfg, sampled = recipe._rows_in_budget(cfg, data, tokenizer, None, clock)
    assert [n for _, n in per_text] == [40, 400]  # two probes: a map's fixed cost is not taken for a text's
    assert sampled_cfg.data.max_train_samples == 500 == len(sampled.splits["train"])
    assert len(sampled.splits["validation"]) == 20 and len(data.splits["train"]) == 3000  # the caller's data kept
    assert clock.shrunk and clock.shrunk[0].startswith("trained on a sample of 500 of 3000 training texts")
    again = recipe._sampled(cfg, data, 500)[1].splits["train"]["text"]
    assert sampled.splits["train"]["text"] == again  # the same seeded sample: a resume draws it again
    # a resume reads the interrupted run's sample from its config.yaml
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    from tfm_cls.config import save_config

    save_config(sampled_cfg, run_dir / "config.yaml")
    resumed_cfg, resumed = recipe._saved_sample(cfg, data, run_dir)
    assert resumed_cfg.data.max_train_samples == 500 and resumed.splits["train"]["text"] == again
    assert recipe._saved_sample(dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, max_train_samples=700)),
                                data, run_dir)[1] is data  # a sample named by the config stands
