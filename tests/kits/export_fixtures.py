"""Fixtures of the export tests: a tiny tokenizer and tiny random-weight models, each exported once
per session (dynamo export takes seconds). Not a conftest: each folder that uses them imports them
in its conftest.py (tests/unit/export, tests/unit/runtime, tests/integration/export)."""

from __future__ import annotations

import pytest
import torch
from tfm_cls.export.exporter import export_classifier, export_seq2seq

from kits.export_testkit import LABELS, MAX_LENGTH, TEXTS, tiny_classifier
from tfm_cls.config import TokenizerConfig
from tfm_cls.data.tokenizer import train_tokenizer
from tfm_cls.model import Seq2SeqTransformer


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer(TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=MAX_LENGTH))


@pytest.fixture(scope="session")
def classifier(tokenizer):
    return tiny_classifier(vocab_size=tokenizer.get_vocab_size())


@pytest.fixture(scope="session")
def classifier_onnx(classifier, tokenizer, tmp_path_factory):
    """(model, path) of the tiny mean-pooling pre-norm classifier exported with its tokenizer."""
    path = tmp_path_factory.mktemp("cls") / "model.onnx"
    export_classifier(classifier, path, tokenizer=tokenizer, labels=LABELS, max_length=MAX_LENGTH)
    return path


@pytest.fixture(scope="session")
def seq2seq():
    torch.manual_seed(0)
    return Seq2SeqTransformer(
        src_vocab_size=50,
        tgt_vocab_size=40,
        d_model=16,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        max_len=40,
    ).eval()


@pytest.fixture(scope="session")
def seq2seq_onnx(seq2seq, tmp_path_factory):
    """{task: path} of model.onnx, encoder.onnx and decoder.onnx."""
    return export_seq2seq(seq2seq, tmp_path_factory.mktemp("s2s"), bos_id=1, eos_id=2)
