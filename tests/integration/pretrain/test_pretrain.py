"""The pretraining loop, fine-tuning initialisation and resume after a kill (the MLM model itself:
tests/unit/pretrain/test_model.py)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from kits.pretrain_tiny import tiny_config, tiny_overrides
from safetensors.torch import load_file
from tokenizers import Tokenizer

from tfm_cls.config import ConfigError, ModelConfig, TokenizerConfig, load_config
from tfm_cls.data.tokenizer import train_tokenizer
from tfm_cls.init_from.pretraining_run import classifier_from_pretraining_run
from tfm_cls.pretrain import PretrainConfig, pretrain
from tfm_cls.runs import ENCODER_FILE
from tfm_cls.training.checkpoint import load_checkpoint


def test_pretraining_loss_falls_and_the_run_directory_is_complete(tiny_pretrained):
    run_dir, metrics = tiny_pretrained
    history = json.loads((run_dir / "history.json").read_text())
    train = [r["loss"] for r in history["train"]]
    evals = [r["loss"] for r in history["eval"]]
    assert len(train) >= 6 and len(evals) >= 2
    # Chance level is ln(vocab) ~ 4.6; the grammar's words are far more predictable than that.
    assert sum(train[:2]) / 2 > 1.5 * sum(train[-2:]) / 2, train
    assert evals[-1] < evals[0] and metrics["validation"]["loss"] == evals[-1]
    assert metrics["validation"]["perplexity"] == pytest.approx(torch.tensor(evals[-1]).exp().item(), rel=1e-6)
    for name in ("pretrain_config.yaml", "model_config.json", "tokenizer.json", ENCODER_FILE,
                 "mlm_head.safetensors", "metrics.json", "pretraining_curves.png", "last.ckpt", "train.log"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "pretraining_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert metrics["corpus"]["train_texts"] == 240 and metrics["corpus"]["extra_texts"] == 0


def test_init_from_copies_exactly_the_encoder_weights_and_makes_a_new_head(tiny_pretrained):
    run_dir, _ = tiny_pretrained
    clf, tokenizer = classifier_from_pretraining_run(run_dir, ModelConfig(dropout=0.2, pooling="cls"), num_classes=3)
    pretrained = load_checkpoint(run_dir / "last.ckpt")["model"]  # the MLM model as trained
    encoder = load_file(str(run_dir / ENCODER_FILE))
    state = clf.state_dict()
    assert set(encoder) == {k for k in state if not k.startswith("head.")}
    for key, tensor in encoder.items():
        assert torch.equal(state[key], tensor), key
        assert torch.equal(tensor, pretrained[key]), key
    assert state["head.weight"].shape == (3, 16) and clf.config["num_classes"] == 3
    assert clf.config["dropout"] == 0.2 and clf.config["pooling"] == "cls"  # from the fine-tuning config
    assert clf.config["d_model"] == 16  # architecture from the run, not ModelConfig's default 128
    assert tokenizer.get_vocab_size() == clf.config["vocab_size"]
    assert tokenizer.get_vocab() == Tokenizer.from_file(str(run_dir / "tokenizer.json")).get_vocab()
    ids = tokenizer.encode("the cat sees the dog").ids
    assert clf(torch.tensor([ids])).shape == (1, 3)


def test_init_from_rejects_a_tokenizer_with_another_vocabulary(tiny_pretrained, tmp_path):
    run_dir, _ = tiny_pretrained
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    foreign = train_tokenizer(
        ["completely different words here", "and more words to learn"] * 5,
        TokenizerConfig(vocab_size=100, min_frequency=1, max_length=32),
    )
    foreign.save(str(other / "tokenizer.json"))
    with pytest.raises(ConfigError, match=r"tokenizer.json has \d+ tokens but the pretrained embedding has \d+ rows"):
        classifier_from_pretraining_run(other, ModelConfig(), num_classes=2)


def test_init_from_rejects_weights_that_do_not_fit(tiny_pretrained, tmp_path):
    run_dir, _ = tiny_pretrained
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    config = json.loads((other / "model_config.json").read_text())
    config["num_layers"] = 3
    (other / "model_config.json").write_text(json.dumps(config))
    with pytest.raises(Exception, match=r"weights do not fit the classifier \(missing: \['encoder.layers.2"):
        classifier_from_pretraining_run(other, ModelConfig(), num_classes=2)
    (other / ENCODER_FILE).unlink()
    with pytest.raises(Exception, match="not a finished pretraining run"):
        classifier_from_pretraining_run(other, ModelConfig(), num_classes=2)


def test_config_errors_are_specific(tiny_data, tmp_path):
    with pytest.raises(ConfigError, match="train.head_lr concerns a classification head"):
        tiny_config(tiny_data, tmp_path / "r", "train.head_lr=1e-3")
    with pytest.raises(ConfigError, match="mlm.seq_len=128 exceeds model.max_len=64"):
        tiny_config(tiny_data, tmp_path / "r", "mlm.seq_len=128")
    with pytest.raises(ConfigError, match="model.max_len: auto .* pretraining packs sequences of mlm.seq_len"):
        tiny_config(tiny_data, tmp_path / "r", "model.max_len=auto")
    with pytest.raises(ConfigError, match="mlm.masking"):
        tiny_config(tiny_data, tmp_path / "r", "mlm.masking=sentence")
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(PretrainConfig, None, ["mlm.mask_rate=0.2"])
    with pytest.raises(ConfigError, match="overlap_min_piece <= overlap_ngram, got 9 and 8"):
        tiny_config(tiny_data, tmp_path / "r", "extra_text.overlap_min_piece=9")


def test_resume_after_sigkill_ends_with_the_weights_of_an_uninterrupted_run(tiny_data, tmp_path):
    steps = ["train.epochs=12", "mlm.masking=whole_word", "model.dropout=0.1"]
    reference = pretrain(tiny_config(tiny_data, tmp_path / "reference", *steps))

    killed_dir = tmp_path / "killed"
    cmd = [sys.executable, "-m", "tfm_cls.cli", "pretrain", *tiny_overrides(tiny_data, killed_dir), *steps]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 120
        while not (killed_dir / "last.ckpt").exists():
            assert proc.poll() is None, "the run ended before it wrote a checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed: make it longer"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = load_checkpoint(killed_dir / "last.ckpt")["step"]
    assert 0 < killed_at < reference["steps"]

    resumed = pretrain(tiny_config(tiny_data, killed_dir, *steps), resume=True)
    assert resumed["steps"] == reference["steps"]
    a = load_file(str(tmp_path / "reference" / ENCODER_FILE))
    b = load_file(str(killed_dir / ENCODER_FILE))
    assert set(a) == set(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert resumed["validation"]["loss"] == reference["validation"]["loss"]


@pytest.mark.slow
def test_ddp_two_processes_match_one_process_with_twice_the_batch(tiny_data, tmp_path):
    """torchrun, 2 CPU processes (gloo) x batch 4 == 1 process x batch 8: same sequences per step,
    same masks (seeded per sequence), same loss weighting, so the same weights up to float rounding."""
    steps = ["model.dropout=0.0", "train.epochs=4"]
    run_dir = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "tfm_cls.cli", "pretrain", *tiny_overrides(tiny_data, run_dir), *steps, "train.batch_size=4"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    single = pretrain(tiny_config(tiny_data, tmp_path / "single", *steps, "train.batch_size=8"))
    assert metrics["processes"] == 2 and metrics["steps"] == single["steps"]
    a = load_file(str(run_dir / ENCODER_FILE))
    b = load_file(str(tmp_path / "single" / ENCODER_FILE))
    d = 16
    for key in a:
        x, y = a[key], b[key]
        if key.endswith("self_attn.in_proj_bias"):
            # The key bias [d:2d] has a zero true gradient (softmax ignores a per-query shift); Adam
            # normalises the rounding noise left there into full-size steps, so only q and v biases compare.
            x, y = torch.cat([x[:d], x[2 * d :]]), torch.cat([y[:d], y[2 * d :]])
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5, msg=key)
    assert metrics["validation"]["loss"] == pytest.approx(single["validation"]["loss"], rel=1e-4)
    clf, _ = classifier_from_pretraining_run(run_dir, ModelConfig(), num_classes=2)
    assert clf.config["vocab_size"] == metrics["vocab_size"]


def test_extra_text_overlapping_test_or_validation_is_dropped_from_the_corpus(tiny_data, tmp_path):
    from tfm_cls.pretrain.corpus import build_corpus

    test_line = json.loads((tiny_data / "test.jsonl").read_text().splitlines()[0])["text"]
    val_line = json.loads((tiny_data / "validation.jsonl").read_text().splitlines()[0])["text"]
    extra = tmp_path / "extra.txt"
    piece = " ".join(test_line.split()[1:7])  # six words cut from inside a test sentence
    # Case and spacing variants of a test and a validation text, a piece of a test text, two unseen texts.
    extra.write_text(
        f"{test_line.upper()}\n{val_line.replace(' ', '  ')}\n{piece}\na zebra naps\nan owl hoots\n", encoding="utf-8"
    )
    cfg = tiny_config(tiny_data, tmp_path / "run", f"extra_text.paths=[{extra}]")
    corpus = build_corpus(cfg)
    assert corpus.report["extra_texts"] == 5 and corpus.report["extra_dropped_overlap"] == 3
    assert corpus.texts[-2:] == ["a zebra naps", "an owl hoots"] and len(corpus.texts) == 240 + 2
    with pytest.raises(Exception, match="3 extra text"):
        build_corpus(tiny_config(tiny_data, tmp_path / "run", f"extra_text.paths=[{extra}]", "extra_text.on_overlap=error"))


def test_train_cls_starts_from_a_pretraining_run(tiny_pretrained, tiny_data, tmp_path):
    """model.init_from=<pretraining run> through the classification trainer: its tokenizer, its encoder."""
    from tfm_cls.config import ClassifierConfig
    from tfm_cls.init_from import load_pretrained
    from tfm_cls.train import train

    run_dir, _ = tiny_pretrained
    model, _ = load_pretrained(str(run_dir), ModelConfig(), 2)
    encoder = load_file(str(run_dir / ENCODER_FILE))
    assert all(torch.equal(model.state_dict()[k], v) for k, v in encoder.items())

    cfg = load_config(ClassifierConfig, None, [
        f"data.path={tiny_data}", f"run_dir={tmp_path / 'cls'}", f"model.init_from={run_dir}",
        "tokenizer.max_length=32", "train.epochs=1", "train.batch_size=16", "train.progress=false",
        "train.num_threads=1", "train.device=cpu",
    ])
    metrics = train(cfg)
    assert metrics["test"]["examples"] == 40
    trained = Tokenizer.from_file(str(tmp_path / "cls" / "tokenizer.json"))
    assert trained.get_vocab() == Tokenizer.from_file(str(run_dir / "tokenizer.json")).get_vocab()
    config = json.loads((tmp_path / "cls" / "model_config.json").read_text())
    assert config["d_model"] == 16 and config["num_classes"] == 2


def test_run_directory_refuses_another_run_and_a_resume_without_checkpoint(tiny_pretrained, tiny_data, tmp_path):
    from tfm_cls.pretrain.recipe import prepare_run_dir
    from tfm_cls.runs import RunDirError

    run_dir, _ = tiny_pretrained
    before = sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(RunDirError, match=r"holds a different pretraining run \(mlm.mask_prob: 0.15 -> 0.2\)"):
        prepare_run_dir(tiny_config(tiny_data, run_dir, "mlm.mask_prob=0.2"), resume=False, overwrite=False)
    with pytest.raises(RunDirError, match="resume it with its own config"):
        prepare_run_dir(tiny_config(tiny_data, run_dir, "mlm.mask_prob=0.2"), resume=True, overwrite=True)
    assert sorted(p.name for p in run_dir.iterdir()) == before, "a refused run must not delete files"
    with pytest.raises(RunDirError, match="holds no pretraining checkpoint"):
        prepare_run_dir(tiny_config(tiny_data, tmp_path / "empty"), resume=True, overwrite=False)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(RunDirError, match="exists and is not empty"):
        prepare_run_dir(tiny_config(tiny_data, other), resume=False, overwrite=False)
