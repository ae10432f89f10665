"""Subword tokenizer trained on the training texts with the `tokenizers` library.

Both kinds (WordPiece, byte-level BPE) share the special tokens [PAD]=0, [UNK], [CLS], [SEP],
[MASK] and encode one text as `[CLS] tokens [SEP]`, truncated to `max_length` (the post-processor
adds [CLS] and [SEP] after truncation, so [SEP] is always last). The saved tokenizer.json carries
truncation and batch-longest padding, so `load_tokenizer(path).encode_batch(texts)` is all a
deployment needs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from tfm_cls.config import InferenceConfig, TokenizerConfig
from tfm_cls.errors import ConfigError, InferenceError, InputError, RunDirError
from tfm_cls.io import atomic_path
from tfm_cls.runtime.text import LongText, TextEncoder

logger = logging.getLogger(__name__)

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = [PAD, UNK, CLS, SEP, MASK]  # ids 0..4, in this order
PAD_ID = 0

C = typing.TypeVar("C")


def _new_tokenizer(cfg: TokenizerConfig) -> tuple[Tokenizer, trainers.Trainer]:
    if cfg.kind == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100))
        # BertNormalizer also puts spaces around CJK characters, so Chinese splits per character.
        tokenizer.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=cfg.lowercase, lowercase=cfg.lowercase
        )
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece(prefix="##")
        trainer = trainers.WordPieceTrainer(
            vocab_size=cfg.vocab_size,
            min_frequency=cfg.min_frequency,
            special_tokens=SPECIAL_TOKENS,
            continuing_subword_prefix="##",
            show_progress=False,
        )
    else:
        tokenizer = Tokenizer(models.BPE(unk_token=UNK))
        steps = [normalizers.NFKC(), normalizers.Strip()] + ([normalizers.Lowercase()] if cfg.lowercase else [])
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=cfg.vocab_size,
            min_frequency=cfg.min_frequency,
            special_tokens=SPECIAL_TOKENS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    return tokenizer, trainer


def configure(tokenizer: Tokenizer, max_length: int) -> Tokenizer:
    """Set the [CLS] ... [SEP] template, truncation to `max_length` and batch-longest padding."""
    cls_id, sep_id = tokenizer.token_to_id(CLS), tokenizer.token_to_id(SEP)
    if tokenizer.token_to_id(PAD) != PAD_ID or cls_id is None or sep_id is None:
        raise ValueError(f"tokenizer must have {PAD} at id {PAD_ID} and {CLS}, {SEP} in its vocabulary")
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1", special_tokens=[(CLS, cls_id), (SEP, sep_id)]
    )
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=PAD_ID, pad_token=PAD)
    return tokenizer


def _continuation_tokens(tokenizer: Tokenizer, texts: list[str]) -> list[str]:
    """Sorted `##c` for every character c that occurs inside a word (after its first character)."""
    chars: set[str] = set()
    for text in texts:
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text)):
            chars.update(word[1:])
    return ["##" + c for c in sorted(chars)]


def _train_wordpiece_deterministically(tokenizer: Tokenizer, texts: list[str], cfg: TokenizerConfig) -> Tokenizer:
    """WordPiece training, reproducible across processes.

    The trainer creates the `##c` continuation tokens in hash-map order, so their ids (which
    break ties between equally frequent merges) change from process to process and so can the
    vocabulary (huggingface/tokenizers#1794). Registering them up front, sorted, fixes their ids;
    the trained vocabulary is then put into a fresh WordPiece model in which only the five real
    special tokens are special.
    """
    trainer = trainers.WordPieceTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=SPECIAL_TOKENS + _continuation_tokens(tokenizer, texts),
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    model = models.WordPiece(
        vocab=tokenizer.get_vocab(), unk_token=UNK, continuing_subword_prefix="##", max_input_chars_per_word=100
    )
    trained = Tokenizer(model)
    trained.normalizer, trained.pre_tokenizer, trained.decoder = (
        tokenizer.normalizer, tokenizer.pre_tokenizer, tokenizer.decoder
    )
    trained.add_special_tokens(SPECIAL_TOKENS)
    return trained


def train_tokenizer(texts: Iterable[str], cfg: TokenizerConfig, position_limit: int | None = None) -> Tokenizer:
    """Train a WordPiece or BPE tokenizer on `texts` (an iterable of strings, e.g. a dataset column).
    Deterministic: the same texts and config give the same tokenizer in any process. With
    `max_length: auto` its truncation length comes from the texts (`auto_max_length`), at most
    `position_limit` (the model's positional encoding) and `cfg.max_length_cap`."""
    tokenizer, trainer = _new_tokenizer(cfg)
    texts = list(texts) if cfg.kind == "wordpiece" or cfg.max_length == "auto" else texts
    if cfg.kind == "wordpiece":
        tokenizer = _train_wordpiece_deterministically(tokenizer, texts, cfg)
    else:
        tokenizer.train_from_iterator(texts, trainer=trainer)
    logger.info("trained %s tokenizer: %d tokens (asked for %d)", cfg.kind, tokenizer.get_vocab_size(), cfg.vocab_size)
    if cfg.max_length != "auto":
        return configure(tokenizer, cfg.max_length)
    configure(tokenizer, 3)  # the [CLS] $A [SEP] template, so that the lengths below count them
    return configure(tokenizer, auto_max_length(tokenizer, texts, cfg, position_limit))


def save_tokenizer(tokenizer: Tokenizer, path: str | Path) -> None:
    """Write tokenizer.json atomically, like every file of a run directory."""
    with atomic_path(path) as tmp:
        tokenizer.save(str(tmp))


def load_tokenizer(path: str | Path, max_length: int | None = None) -> Tokenizer:
    """Load a tokenizer.json; truncation as saved unless `max_length` is given."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file {path} does not exist")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception on malformed JSON
        raise RunDirError(
            f"{path}: not a valid tokenizers JSON file ({str(err)[:200]}); restore it from a copy or retrain the run"
        ) from err
    if max_length is not None:
        tokenizer.enable_truncation(max_length=max_length)
    elif tokenizer.truncation is None:
        raise ValueError(f"{path}: tokenizer has no truncation set; pass max_length")
    return tokenizer


def load_tokenizer_str(tokenizer_json: str, max_length: int, limit: int | None) -> Tokenizer:
    """A copy of a tokenizer truncating to `max_length` (a --max-length flag), which must leave
    room for one text token and stay within the model's `limit` (None: no limit)."""
    tokenizer = Tokenizer.from_str(tokenizer_json)
    shortest = tokenizer.num_special_tokens_to_add(False) + 1
    if not shortest <= max_length <= (limit or max_length):
        raise InputError(f"--max-length must be in [{shortest}, {limit or 'any'}] for this model, got {max_length}")
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def max_length_of(tokenizer: Tokenizer) -> int:
    """The truncation length a tokenizer was configured with."""
    if tokenizer.truncation is None:
        raise ValueError("tokenizer has no truncation length")
    return int(tokenizer.truncation["max_length"])


def configure_truncation(tokenizer: Tokenizer, max_length: int) -> Tokenizer:
    """A pretrained tokenizer keeps its own template; we only set truncation (and padding)."""
    if tokenizer.post_processor is None:
        return configure(tokenizer, max_length)
    tokenizer.enable_truncation(max_length=max_length)
    if tokenizer.padding is None:  # keep a checkpoint's own padding (RoBERTa pads with <pad> = 1)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else PAD_ID, pad_token="[PAD]")
    return tokenizer


def marker_ids(tokenizer: Tokenizer) -> list[int]:
    """The ids the tokenizer's template adds to every text and pair ([CLS], [SEP]; a RoBERTa
    checkpoint's <s>, </s>): what an empty text and an empty pair encode to, padding aside. Markers
    of the encoder's input, not words of the text: the wide branch does not count them."""
    padding = tokenizer.padding
    pad = None if padding is None else padding["pad_id"]
    ids = tokenizer.encode("").ids + tokenizer.encode("", "").ids
    return sorted({i for i in ids if i != pad})


# ---- long texts: the length chosen from the data, truncation strategies, windows ------------------


def token_lengths(tokenizer: Tokenizer, texts: Sequence[str]) -> np.ndarray:
    """Untruncated token counts of `texts`, special tokens included."""
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_truncation()
    tok.no_padding()
    return np.asarray([len(e.ids) for e in tok.encode_batch(list(texts))], dtype=np.int64)


def percentile_length(lengths: Sequence[int] | np.ndarray, percentile: float) -> int:
    """The smallest length L such that at least `percentile` % of `lengths` are <= L (the
    inverted-CDF percentile: with 100 the longest, with 50 the lower median)."""
    if not 0.0 < percentile <= 100.0:
        raise ConfigError(f"tokenizer.length_percentile: expected a percentile in (0, 100], got {percentile}")
    ordered = np.sort(np.asarray(lengths, dtype=np.int64))
    if len(ordered) == 0:
        raise ConfigError("tokenizer.max_length: auto needs training texts to measure")
    rank = max(1, math.ceil(percentile / 100.0 * len(ordered)))  # 1-based rank of the answer
    return int(ordered[rank - 1])


def auto_max_length(
    tokenizer: Tokenizer, texts: Sequence[str], cfg: TokenizerConfig, position_limit: int | None = None
) -> int:
    """`tokenizer.max_length: auto` resolved: the `length_percentile`-th percentile of the texts'
    token lengths (special tokens included), capped by `max_length_cap` (the cost cap) and by
    `position_limit` (the model's positional encoding), and at least 3. Logged."""
    lengths = token_lengths(tokenizer, texts)
    wanted = percentile_length(lengths, cfg.length_percentile)
    caps = {"tokenizer.max_length_cap": cfg.max_length_cap}
    if position_limit is not None:
        caps["the model's position limit (model.max_len)"] = int(position_limit)
    chosen = max(3, min(wanted, *caps.values()))
    capped_by = [name for name, cap in caps.items() if cap == chosen and cap < wanted]
    logger.info(
        "tokenizer.max_length auto: %d tokens (percentile %g of %d training texts' token lengths is %d%s; "
        "%.1f%% of them are longer and get truncated or windowed)",
        chosen, cfg.length_percentile, len(lengths), wanted, f", capped by {capped_by[0]}" if capped_by else "",
        100.0 * float((lengths > chosen).mean()),
    )
    return chosen


def resolved_lengths(cfg: C, max_length: int, max_len: int | str) -> C:
    """`cfg` (a ClassifierConfig, or any config with tokenizer and model sections, e.g. a
    DistillConfig) with tokenizer.max_length and model.max_len set to the numbers chosen for them."""
    try:
        tokenizer = dataclasses.replace(cfg.tokenizer, max_length=max_length)
        return dataclasses.replace(cfg, tokenizer=tokenizer, model=dataclasses.replace(cfg.model, max_len=max_len))
    except ValueError as err:  # e.g. a stride no longer smaller than the window chosen
        raise ConfigError(f"with tokenizer.max_length auto = {max_length}: {err}") from None


def long_text_of(cfg: TokenizerConfig, inference: InferenceConfig, **overrides) -> LongText:
    """The LongText policy (tfm_cls.runtime.text) of a config's tokenizer and inference sections (the
    cut and the windows; chunking and aggregation), with some fields overridden (None = keep the
    config's)."""
    fields = {
        "truncation": cfg.truncation, "head_fraction": cfg.head_fraction, "chunk": inference.chunk, "stride": cfg.stride,
        "aggregate": inference.aggregate, "scores": inference.aggregate_scores,
    }
    fields.update({k: v for k, v in overrides.items() if v is not None})
    return LongText(**fields)


def text_encoder(tokenizer: Tokenizer, policy: LongText, max_length: int | None = None) -> TextEncoder:
    """The one encoder of model rows (tfm_cls.runtime.text.TextEncoder); a policy that cannot work
    is a ConfigError."""
    try:
        return TextEncoder(tokenizer, max_length or max_length_of(tokenizer), policy)
    except InferenceError as err:
        raise ConfigError(f"tokenizer: {err}") from None


# ---- a pretrained vocabulary extended with the characters it cannot read ---------------------------


def _wordpiece_model(tokenizer: Tokenizer, spec: dict | None = None) -> dict:
    """The `model` section of a WordPiece tokenizer's JSON; ConfigError for any other kind."""
    model = (spec or json.loads(tokenizer.to_str()))["model"]
    if model.get("type") != "WordPiece":
        raise ConfigError(f"tokenizer.extend_vocab needs a WordPiece vocabulary, this tokenizer is {model.get('type')}")
    return model


def unknown_characters(tokenizer: Tokenizer, texts: Sequence[str], min_count: int = 1) -> list[str]:
    """The characters of `texts` a WordPiece vocabulary reads only as [UNK], most frequent first
    (ties in code-point order), each seen at least `min_count` times (default: every one, as a TF-IDF
    vocabulary keeps a term seen once: a few labelled texts show most characters once, and a new token
    starts as [UNK] in the encoder, so only the bag reads the difference); in the tokenizer's normalised
    form (lowercased, accents stripped where it does so). ConfigError for a vocabulary that is
    not WordPiece (a byte-level BPE reads every character already)."""
    unk_id = tokenizer.token_to_id(_wordpiece_model(tokenizer).get("unk_token", UNK))
    vocab = tokenizer.get_vocab()
    probe = Tokenizer.from_str(tokenizer.to_str())
    probe.no_truncation()
    probe.no_padding()
    counts: dict[str, int] = {}
    for text, encoding in zip(texts, probe.encode_batch(list(texts), add_special_tokens=False)):
        for token_id, (start, end) in zip(encoding.ids, encoding.offsets):
            if token_id != unk_id:
                continue
            span = text[start:end]
            if tokenizer.normalizer is not None:
                span = tokenizer.normalizer.normalize_str(span)
            for char in span:
                if not char.isspace() and char not in vocab:
                    counts[char] = counts.get(char, 0) + 1
    return sorted((c for c, n in counts.items() if n >= min_count), key=lambda c: (-counts[c], c))


def extend_vocabulary(tokenizer: Tokenizer, characters: Sequence[str]) -> Tokenizer:
    """A copy of a WordPiece tokenizer whose vocabulary also holds each of `characters`, as a word
    and as a `##` continuation (ids after the existing ones, in the order given), so a text's
    characters that read as [UNK] before get tokens of their own."""
    spec = json.loads(tokenizer.to_str())
    model = _wordpiece_model(tokenizer, spec)
    vocab: dict[str, int] = model["vocab"]
    prefix = model.get("continuing_subword_prefix", "##")
    next_id = max(vocab.values()) + 1
    for char in characters:
        for token in (char, prefix + char):
            if token not in vocab:
                vocab[token] = next_id
                next_id += 1
    return Tokenizer.from_str(json.dumps(spec))
