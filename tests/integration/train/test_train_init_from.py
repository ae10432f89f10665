"""model.init_from: training with the pretrained tokenizer (the dispatch by source kind:
tests/unit/pretrained/test_init.py)."""

import json

from kits.tiny_topics import make_texts, tiny_config

from tfm_cls import runs as R
from tfm_cls.config import TokenizerConfig
from tfm_cls.model import TransformerClassifier
from tfm_cls.tokenizer import train_tokenizer
from tfm_cls.train import train


def test_training_from_a_pretraining_run_uses_its_model_and_tokenizer(tiny_data, tmp_path, monkeypatch):
    import tfm_cls.pretrained as pretrained

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
