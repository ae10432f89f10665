"""suggest's vectors on onnxruntime: the packaged MiniLM exported once into the user's cache folder
($XDG_CACHE_HOME, a temporary folder in the tests: tests/conftest.py), reused after, equal to the
PyTorch encoder's vectors, and run where torch cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfm_cls.suggest.encoder import cache_dir

TEXTS = ["a cat sat on the mat", "the film was awful and far too long", "bread, cheese and soup",
         "word " * 700, "", "ünïcödé 漢字 😀"]


def test_the_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "tfm_cls"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG rule: a relative value is ignored
    assert cache_dir() == Path.home() / ".cache" / "tfm_cls"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "tfm_cls"


def test_exported_once_into_the_cache_and_equal_to_pytorch(minilm):
    import torch

    from tfm_cls.config.schema import ModelConfig
    from tfm_cls.init_from.hf import classifier_from_hf
    from tfm_cls.pretrained_encoder import ENCODER
    from tfm_cls.suggest.vectors import MiniLMVectors

    path = minilm.model_path
    assert path.startswith(os.environ["XDG_CACHE_HOME"]) and os.path.isfile(path)
    before = os.stat(path).st_mtime_ns
    again = MiniLMVectors()  # the cached file, not a second export
    assert again.model_path == path and os.stat(path).st_mtime_ns == before
    got = minilm(TEXTS)
    assert got.shape == (len(TEXTS), 384) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    model, _ = classifier_from_hf(ENCODER, ModelConfig(dropout=0.0, max_len=256, pooling="mean"), num_classes=1)
    model.eval()
    encoded = minilm.encoder.encode(TEXTS[:3])  # one window each
    with torch.no_grad():
        for i, ids in enumerate(encoded.ids):
            t = torch.tensor([ids])
            want = torch.nn.functional.normalize(model.features(t, torch.ones_like(t), torch.zeros_like(t)), dim=-1)
            assert float(want[0] @ torch.from_numpy(got[i])) > 0.99999
    # batching (other lengths beside it, padding) changes no vector
    assert np.allclose(minilm(TEXTS[1:2]), got[1:2], atol=1e-5)


def test_vectors_need_no_torch_once_cached(minilm, tmp_path):
    from kits.import_guard import guarded_env

    env = guarded_env(tmp_path, "torch")
    code = ("import numpy as np; from tfm_cls.suggest.vectors import MiniLMVectors; v = MiniLMVectors(); "
            f"print(v.model_path); np.save({str(tmp_path / 'v.npy')!r}, v({TEXTS!r}))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == minilm.model_path
    assert np.allclose(np.load(tmp_path / "v.npy"), minilm(TEXTS), atol=1e-5)


def test_a_missing_minilm_says_which_extra(monkeypatch):
    import tfm_cls.pretrained_encoder as pe
    from tfm_cls.errors import InputError
    from tfm_cls.suggest.encoder import cached_encoder

    monkeypatch.setattr(pe, "encoder_folder", lambda: None)
    with pytest.raises(InputError, match=r"tfm-cls\[minilm\]"):
        cached_encoder(256)
