"""Configuration of `tfm-cls pretrain` (configs/pretrain/*.yaml): the corpus's extra text, the
masking, and the classifier's own data / tokenizer / model / train sections."""

from __future__ import annotations

import dataclasses
import typing

from tfm_cls.config import (
    CLASSIFIER_RENAMES,
    DataConfig,
    ModelConfig,
    RunConfig,
    TokenizerConfig,
    TrainConfig,
    require,
)
from tfm_cls.pretrain.masking import MASKING_MODES


@dataclasses.dataclass(kw_only=True)
class ExtraTextConfig:
    """Unlabelled text added to the training split's texts. Checked against evaluation texts."""

    paths: list[str] = dataclasses.field(default_factory=list)
    """Local files: `.txt` (one text per line) or `.jsonl` (one object per line, field `text_field`)."""
    text_field: str = "text"
    hf_dataset: str | None = None
    """A Hugging Face dataset id (or local dataset script/folder) whose texts are added."""
    hf_config: str | None = None
    hf_split: str = "train"
    hf_text_column: str = "text"
    max_texts: int | None = None
    """Keep a seeded random subset of this many extra texts."""
    on_overlap: typing.Literal["drop", "error"] = "drop"
    """Extra texts that hold a test or validation text (pretrain.corpus.find_overlap): dropped, or an error."""
    overlap_ngram: int = 8
    """An extra text sharing a run of this many words with a test or validation text is overlap."""
    overlap_min_piece: int = 4
    """Shorter texts count as overlap when one is wholly a piece of the other, from this many words."""

    def __post_init__(self) -> None:
        require(self.max_texts is None or self.max_texts > 0, f"extra_text.max_texts: expected > 0, got {self.max_texts}")
        require(
            1 <= self.overlap_min_piece <= self.overlap_ngram,
            f"extra_text: expected 1 <= overlap_min_piece <= overlap_ngram, "
            f"got {self.overlap_min_piece} and {self.overlap_ngram}",
        )


@dataclasses.dataclass(kw_only=True)
class MLMConfig:
    """What is masked and how sequences are built."""

    mask_prob: float = 0.15
    """Share of (non-special) tokens that become prediction targets."""
    mask_token_frac: float = 0.8
    """Share of targets replaced by [MASK]."""
    random_token_frac: float = 0.1
    """Share of targets replaced by a random token; the rest stay unchanged."""
    masking: typing.Literal["token", "whole_word", "span"] = "token"
    """token: independent tokens; whole_word: all pieces of a chosen word; span: runs of words (SpanBERT)."""
    span_geometric_p: float = 0.2
    """span masking: span lengths in words ~ geometric(p) (mean 1/p), clipped at max_span."""
    max_span: int = 10
    pack: bool = True
    """Concatenate texts ([CLS] a [SEP] b [SEP] ...) into sequences of exactly seq_len tokens."""
    seq_len: int = 128
    """Tokens per packed sequence (or the truncation length without packing); <= model.max_len."""
    max_eval_sequences: int = 512
    """Validation MLM loss on at most this many sequences of the validation split's texts."""

    def __post_init__(self) -> None:
        require(0.0 < self.mask_prob < 1.0, f"mlm.mask_prob: expected (0, 1), got {self.mask_prob}")
        require(
            self.mask_token_frac >= 0 and self.random_token_frac >= 0 and self.mask_token_frac + self.random_token_frac <= 1,
            f"mlm.mask_token_frac + mlm.random_token_frac must be within [0, 1], got {self.mask_token_frac} + "
            f"{self.random_token_frac}",
        )
        require(self.masking in MASKING_MODES, f"mlm.masking: expected one of {list(MASKING_MODES)}, got {self.masking!r}")
        require(0.0 < self.span_geometric_p <= 1.0, f"mlm.span_geometric_p: expected (0, 1], got {self.span_geometric_p}")
        require(self.max_span >= 1, f"mlm.max_span: expected >= 1, got {self.max_span}")
        require(self.seq_len >= 3, f"mlm.seq_len: expected >= 3, got {self.seq_len}")
        require(self.max_eval_sequences >= 1, f"mlm.max_eval_sequences: expected >= 1, got {self.max_eval_sequences}")


@dataclasses.dataclass(kw_only=True)
class PretrainConfig(RunConfig):
    """Everything `tfm-cls pretrain` needs; saved resolved as pretrain_config.yaml in the run directory.

    `data` is the labelled dataset the encoder will be fine-tuned on: its training split's texts
    are the default corpus, its test and validation texts are what extra text must not contain,
    and the validation texts measure the MLM loss. `train` is the classifier's TrainConfig; the
    fields that only concern a classification head must stay at their defaults.
    """

    preset_folder: typing.ClassVar[str] = "pretrain"
    renamed_keys: typing.ClassVar[dict[str, str | None]] = {
        old: None for old in CLASSIFIER_RENAMES  # classifier settings that pretraining never read
    }
    name: str = "pretrain"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    use_train_split: bool = True
    """Pretrain on the training split's texts (the extra text is added to them)."""
    extra_text: ExtraTextConfig = dataclasses.field(default_factory=ExtraTextConfig)
    tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    mlm: MLMConfig = dataclasses.field(default_factory=MLMConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    """The classifier's training settings; configs/pretrain/*.yaml set MLM-friendly values
    (a small model on a small corpus learns fastest with a high peak lr, e.g. 1e-3 .. 2e-3)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.use_train_split or bool(self.extra_text.paths) or bool(self.extra_text.hf_dataset),
            "use_train_split=false needs extra text: set extra_text.paths or extra_text.hf_dataset",
        )
        require(
            self.model.max_len != "auto",
            "model.max_len: auto sizes a classifier's position table from its training texts; pretraining packs "
            f"sequences of mlm.seq_len={self.mlm.seq_len} tokens: give a number >= that (fine-tuning keeps it)",
        )
        require(
            self.mlm.seq_len <= self.model.max_len,
            f"mlm.seq_len={self.mlm.seq_len} exceeds model.max_len={self.model.max_len} (the positional encoding's size)",
        )
        require(
            self.model.init_from is None,
            f"model.init_from={self.model.init_from!r}: pretraining starts from scratch (resume with --resume)",
        )
        defaults = TrainConfig()
        for key in ("head_lr", "layerwise_lr_decay", "head_only_steps", "label_smoothing"):
            require(
                getattr(self.train, key) == getattr(defaults, key),
                f"train.{key} concerns a classification head and has no meaning in pretraining; "
                f"remove it (got {getattr(self.train, key)!r})",
            )
        require(
            self.train.window == defaults.window,
            f"train.window={self.train.window!r} chooses a classifier's training windows; pretraining builds its "
            "own sequences (mlm.seq_len, mlm.pack): remove it",
        )
