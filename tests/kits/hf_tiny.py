"""Tiny random BERT-family checkpoints saved the way Hugging Face saves them, built offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

transformers = pytest.importorskip("transformers", reason="transformers (dev extra) is the reference implementation")

WORDS = "the a movie was great terrible not good bad plot actors ##s ##ing ##ed what where who when".split()
LETTERS = list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]


def write_tokenizer(folder: Path, specials: list[str]) -> Tokenizer:
    """A small WordPiece tokenizer.json (BERT-style: lowercase, `CLS text SEP`); `specials` come
    first, so their order decides the special ids (BERT: [PAD]=0; RoBERTa-style: pad=1)."""
    vocab = {tok: i for i, tok in enumerate(specials + WORDS + LETTERS + list(".,!?'"))}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=specials[specials.index("[UNK]")]))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    return tokenizer


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ROBERTA_SPECIALS = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]  # pad_token_id = 1, as RoBERTa


def tiny_config(model_type: str, vocab_size: int, **overrides):
    common = dict(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=40, layer_norm_eps=1e-7,
        hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3,
    )
    common.update(overrides)
    if model_type == "bert":
        return transformers.BertConfig(pad_token_id=0, **common)
    if model_type == "roberta":
        # RoBERTa numbers positions from pad_token_id + 1: 40 rows leave 38 usable positions.
        return transformers.RobertaConfig(pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1, **common)
    if model_type == "electra":
        return transformers.ElectraConfig(pad_token_id=0, embedding_size=32, **common)
    raise ValueError(model_type)


def save_tiny(folder: Path, model_type: str = "bert", head: str | None = None, seed: int = 0, **overrides) -> Path:
    """Save a random tiny `model_type` encoder (optionally wrapped in a task model, which prefixes
    its keys and adds head weights) plus a tokenizer.json into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    specials = ROBERTA_SPECIALS if model_type == "roberta" else BERT_SPECIALS
    tokenizer = write_tokenizer(folder, specials)
    config = tiny_config(model_type, tokenizer.get_vocab_size() + 3, **overrides)  # spare rows, as real vocabs
    torch.manual_seed(seed)
    if head == "classification":
        config.num_labels = 3
        model = transformers.AutoModelForSequenceClassification.from_config(config)
    elif head == "pretraining" and model_type == "electra":
        model = transformers.ElectraForPreTraining(config)
    elif head == "mlm":
        model = transformers.AutoModelForMaskedLM.from_config(config)
    else:
        model = transformers.AutoModel.from_config(config)
    with torch.no_grad():  # random, not zero, biases and norms, so a swapped tensor cannot hide
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    return folder


def reference_model(folder: Path):
    """The transformers encoder (no head) loaded from `folder`, in eval mode."""
    return transformers.AutoModel.from_pretrained(str(folder)).eval()


def read_config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())
