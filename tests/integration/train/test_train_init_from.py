"""model.init_from: training with the pretrained tokenizer (the dispatch by source kind:
tests/unit/init_from/test_init.py)."""

import json

import pytest
import torch
from kits.tiny_topics import CLASSES, SPLITS, WORDS, make_texts, tiny_config, write_dataset

from tfm_cls import runs as R
from tfm_cls.config import TokenizerConfig
from tfm_cls.data.tokenizer import train_tokenizer
from tfm_cls.model import TransformerClassifier
from tfm_cls.train import train


def test_training_from_a_pretraining_run_uses_its_model_and_tokenizer(tiny_data, tmp_path, monkeypatch):
    import tfm_cls.init_from as pretrained

    source = tmp_path / "pretrain-run"
    source.mkdir()
    (source / "encoder.safetensors").write_bytes(b"")
    # A tokenizer trained on other texts, with a larger max_length than the run asks for.
    other = train_tokenizer([r["text"] + " zebra quokka" for r in make_texts(40, 9)],
                            TokenizerConfig(vocab_size=110, min_frequency=1, max_length=30))
    calls = []

    def fake(path, model_cfg, num_classes):
        calls.append((path, model_cfg.pooling, num_classes))
        model = TransformerClassifier(vocab_size=other.get_vocab_size(), num_classes=num_classes, d_model=16,
                                      nhead=2, num_layers=1, dim_feedforward=32, max_len=32)
        return model, other

    monkeypatch.setattr(pretrained, "classifier_from_pretraining_run", fake)
    run_dir = tmp_path / "run"
    train(tiny_config(tiny_data, run_dir, f"model.init_from={source}", "train.epochs=1"))
    assert calls == [(str(source), "mean", 3)]
    saved = json.loads((run_dir / R.TOKENIZER_FILE).read_text())
    assert saved["model"]["vocab"] == json.loads(other.to_str())["model"]["vocab"]  # not retrained
    assert saved["truncation"]["max_length"] == 16  # tokenizer.max_length of the run
    assert R.load_run(run_dir).model.config["vocab_size"] == other.get_vocab_size()


CHINESE = {"animals": "猫狗鸟鱼马虎", "food": "米面汤茶饭糕"}


def _chinese_topics(folder):
    """The tiny topics with the animal and food words written in Chinese characters, which an
    English vocabulary reads only as [UNK]: without them the two classes look the same."""
    splits = {}
    for i, (split, n) in enumerate(zip(SPLITS, (90, 45, 45))):
        rows = make_texts(n, 20 + i)
        for row in rows:
            name = CLASSES[row["label"]]
            if name in CHINESE:  # each topic word -> a character of the class (its position in the class)
                row["text"] = " ".join(CHINESE[name][WORDS[name].index(w)] if w in WORDS[name] else w
                                       for w in row["text"].split())
        splits[split] = rows
    return write_dataset(folder, splits, CLASSES)


def test_extend_vocab_gives_unknown_characters_tokens_through_training_and_the_export(tmp_path, monkeypatch):
    import numpy as np
    from tfm_cls.export.exporter import export_run

    import tfm_cls.init_from as pretrained
    from tfm_cls.classify.predict import texts_logits
    from tfm_cls.runtime.session import Classifier

    data = _chinese_topics(tmp_path / "data")
    source = tmp_path / "pretrain-run"
    source.mkdir()
    (source / "encoder.safetensors").write_bytes(b"")
    english = train_tokenizer([r["text"] for r in make_texts(60, 9)],
                              TokenizerConfig(vocab_size=110, min_frequency=1, max_length=30))

    def fake(path, model_cfg, num_classes):
        torch.manual_seed(0)
        model = TransformerClassifier(vocab_size=english.get_vocab_size(), num_classes=num_classes, d_model=16,
                                      nhead=2, num_layers=1, dim_feedforward=32, max_len=32)
        return model, english

    monkeypatch.setattr(pretrained, "classifier_from_pretraining_run", fake)
    results = {}
    for extend in (0, 100):
        run_dir = tmp_path / f"run-{extend}"
        results[extend] = train(tiny_config(data, run_dir, f"model.init_from={source}", "train.epochs=12",
                                            f"tokenizer.extend_vocab={extend}"))
    run_dir = tmp_path / "run-100"
    vocab = json.loads((run_dir / R.TOKENIZER_FILE).read_text())["model"]["vocab"]
    old_size = english.get_vocab_size()
    added = sorted(set(vocab) - set(english.get_vocab()), key=vocab.get)
    assert {c for c in added if not c.startswith("##")} == set("".join(CHINESE.values()))
    assert min(vocab[t] for t in added) == old_size
    loaded = R.load_run(run_dir)
    assert loaded.model.config["vocab_size"] == old_size + len(added)
    # Without the characters animals and food are the same [UNK] texts; with them, told apart.
    assert results[0]["test"]["accuracy"] < 0.8 < results[100]["test"]["accuracy"]
    # The export reads them too: onnxruntime and PyTorch agree on a text of new tokens.
    path = export_run(run_dir)
    texts = ["猫 the 狗 鱼", "汤 茶 with rice", "tennis golf"]
    runtime, _, _ = Classifier(path).classify(texts)
    logits, _, _ = texts_logits(loaded, texts)
    scaled = np.exp(logits / loaded.temperature)  # the calibrated scores, as every path gives them
    expected = scaled / scaled.sum(-1, keepdims=True)
    assert np.asarray(runtime) == pytest.approx(expected, abs=1e-5)
