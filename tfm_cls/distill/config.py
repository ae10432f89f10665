"""Configuration of `tfm-cls distill` (configs/distill/*.yaml): the teacher, the transfer set, the
soft-target loss and the student (data / tokenizer / model / train sections like a classifier's)."""

from __future__ import annotations

import dataclasses
import typing

from tfm_cls.config import (
    CLASSIFIER_RENAMES,
    ClassifierConfig,
    DataConfig,
    InferenceConfig,
    ModelConfig,
    RunConfig,
    TokenizerConfig,
    TrainConfig,
    WideConfig,
    require,
)
from tfm_cls.distill.cut import check_layer_spec
from tfm_cls.pretrain.config import ExtraTextConfig


@dataclasses.dataclass(kw_only=True)
class TeacherConfig:
    """The model whose outputs the student learns from."""

    path: str = ""
    """A classification run directory (`tfm-cls train`, e.g. fine-tuned from MiniLM) or one of our
    exported ONNX files (`tfm-cls export`, `tfm-cls quantize`: the int8 file labels fastest on CPU)."""
    sha256: str | None = None
    """sha256 of the teacher's weights file (run directory) or ONNX file. None: the run fills it in,
    so the saved distill_config.yaml records which teacher labelled the transfer set; set: the
    teacher must have it (an error otherwise)."""
    batch_size: int = 64
    """Texts per teacher forward pass while labelling (batches are formed by length)."""
    chunk_size: int = 2048
    """Texts labelled between two writes of the cache: a killed run loses at most one chunk."""
    threads: int | None = None
    """CPU threads of the teacher (onnxruntime intra-op / torch); None: the library's default."""

    def __post_init__(self) -> None:
        require(bool(self.path), "teacher.path: give a classification run directory or an exported .onnx file")
        require(self.batch_size >= 1, f"teacher.batch_size: expected >= 1, got {self.batch_size}")
        require(self.chunk_size >= 1, f"teacher.chunk_size: expected >= 1, got {self.chunk_size}")
        require(self.threads is None or self.threads >= 1, f"teacher.threads: expected >= 1 or null, got {self.threads}")


@dataclasses.dataclass(kw_only=True)
class TransferConfig:
    """The texts the teacher labels: the training texts, augmented copies of them, optional extra
    unlabelled text. Augmentation follows Tang et al. (2019): each word of a copy is masked with
    `mask_rate`, else replaced with `replace_rate`; then the copy is cut to a random n-gram with
    `ngram_rate`. Deterministic for a seed."""

    copies: int = 10
    """Augmented copies per training text (0: the training texts only). Duplicates are dropped."""
    mask_rate: float = 0.1
    """Share of a copy's words replaced by [MASK]."""
    replace_rate: float = 0.1
    """Share of a copy's (unmasked) words replaced by another word of the training vocabulary,
    drawn by frequency."""
    ngram_rate: float = 0.25
    """Share of copies cut to a random run of `ngram_min`..`ngram_max` words."""
    ngram_min: int = 1
    ngram_max: int = 5
    extra_text: ExtraTextConfig = dataclasses.field(default_factory=ExtraTextConfig)
    """Unlabelled text added as it is (the teacher labels it); texts that hold a test or validation
    text are dropped (or an error), with the MLM corpus's overlap guard. Single texts only."""
    pair_neighbours: int = 0
    """Sentence pairs only: pair each distinct training sentence with its k nearest other training
    sentences (word TF-IDF cosine) as new, unlabelled pairs; 0: off. A validation or test pair is
    never added."""
    seed: int | None = None
    """Seed of the augmentation (None: the run's seed)."""

    def __post_init__(self) -> None:
        require(self.copies >= 0, f"transfer.copies: expected >= 0, got {self.copies}")
        require(self.pair_neighbours >= 0, f"transfer.pair_neighbours: expected >= 0, got {self.pair_neighbours}")
        for key in ("mask_rate", "replace_rate", "ngram_rate"):
            value = getattr(self, key)
            require(0.0 <= value <= 1.0, f"transfer.{key}: expected a rate in [0, 1], got {value}")
        require(
            1 <= self.ngram_min <= self.ngram_max,
            f"transfer: expected 1 <= ngram_min <= ngram_max, got {self.ngram_min} and {self.ngram_max}",
        )


@dataclasses.dataclass(kw_only=True)
class DistillLossConfig:
    """loss = (1 - gold_weight) * soft + gold_weight * gold on a text with a gold label, soft alone
    on one without (augmented copies, extra text)."""

    soft: typing.Literal["kl", "mse"] = "kl"
    """kl: KL(teacher || student) of the softmax at `temperature`, times temperature^2 (Hinton et al.);
    mse: mean squared error between the logits (Ba & Caruana; Tang et al.)."""
    temperature: float = 2.0
    gold_weight: float = 0.5
    """Weight of the cross-entropy on the gold label, where a text has one."""
    feature_weight: float = 0.0
    """Weight of a hint on the representation (FitNets-style), added to the loss above: the mean
    squared error between the student's pooled vector and the teacher's, projected on its first
    d_model principal axes over the transfer set (fixed, scaled to unit variance). 0: off. Needs
    teacher.path to be the teacher's run directory (an ONNX file outputs no pooled vector)."""

    def __post_init__(self) -> None:
        require(self.feature_weight >= 0.0, f"loss.feature_weight: expected >= 0, got {self.feature_weight}")
        require(self.temperature > 0, f"loss.temperature: expected > 0, got {self.temperature}")
        require(0.0 <= self.gold_weight <= 1.0, f"loss.gold_weight: expected [0, 1], got {self.gold_weight}")


@dataclasses.dataclass(kw_only=True)
class StudentConfig:
    """How the student's vocabulary and embeddings start (its architecture is `model`)."""

    tokenizer: typing.Literal["own", "teacher"] = "own"
    """own: a tokenizer trained (per `tokenizer`) on the training + extra texts; teacher: the
    teacher's tokenizer (its truncation set to tokenizer.max_length)."""
    embedding_init: typing.Literal["random", "teacher_pca", "teacher_output_pca"] = "random"
    """teacher_pca: token embeddings = the teacher's input embedding matrix projected to d_model
    by PCA; teacher_output_pca: the teacher's output for each vocabulary token alone (`[CLS]
    token [SEP]`, pooled as its head reads it: model2vec's recipe, from the fine-tuned teacher)
    projected the same way. Both need `tokenizer: teacher` and the teacher's weights (a run
    directory, or an ONNX file inside one)."""
    layers: list[int] | str | int | None = None
    """A student cut from the teacher (tfm_cls.distill.cut): the teacher layers it keeps, as a list
    ([0, 2, 4]), `first:K`, `spread:K` (K layers evenly spaced, ending at the last) or `every_other`;
    it starts with the teacher's embeddings, width, heads, pooling and head, and `model.*` is
    replaced by the teacher's architecture. Needs `tokenizer: teacher` and the teacher's weights
    (its run directory, or an ONNX file inside it). None: a from-scratch student (`model.*`)."""
    select: typing.Literal["best", "last"] = "last"
    """Which weights the run keeps: the best on validation (train.best_metric), or the last ones
    (a small validation carve is noisy; the soft targets regularise, so late weights are good)."""

    def __post_init__(self) -> None:
        require(
            self.embedding_init == "random" or self.tokenizer == "teacher",
            f"student.embedding_init={self.embedding_init} needs student.tokenizer=teacher (the rows must be the teacher's tokens)",
        )
        if self.layers is not None:
            check_layer_spec(self.layers)
            require(self.tokenizer == "teacher",
                    "student.layers: a student cut from the teacher reads the teacher's tokens; set student.tokenizer: teacher")
            require(self.embedding_init == "random",
                    f"student.layers: a cut student keeps the teacher's embeddings as they are; remove "
                    f"student.embedding_init={self.embedding_init}")


@dataclasses.dataclass(kw_only=True)
class DistillConfig(RunConfig):
    """Everything `tfm-cls distill` needs; saved resolved as distill_config.yaml in the run directory
    (beside config.yaml, the student's ClassifierConfig, which makes the result an ordinary run)."""

    preset_folder: typing.ClassVar[str] = "distill"
    renamed_keys: typing.ClassVar[dict[str, str | None]] = CLASSIFIER_RENAMES
    name: str = "distill"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    teacher: TeacherConfig = dataclasses.field(default_factory=TeacherConfig)
    transfer: TransferConfig = dataclasses.field(default_factory=TransferConfig)
    loss: DistillLossConfig = dataclasses.field(default_factory=DistillLossConfig)
    student: StudentConfig = dataclasses.field(default_factory=StudentConfig)
    tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    wide: WideConfig = dataclasses.field(default_factory=WideConfig)
    """The student's bag-of-terms branch (its config.yaml's `wide`)."""
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    inference: InferenceConfig = dataclasses.field(default_factory=InferenceConfig)
    """The student's evaluation and inference on long texts (its config.yaml's `inference`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            self.model.init_from is None,
            f"model.init_from={self.model.init_from!r}: a distilled student starts from scratch "
            "(student.embedding_init=teacher_pca / teacher_output_pca starts its embeddings from the teacher's)",
        )
        require(
            "auto" in (self.tokenizer.max_length, self.model.max_len) or self.tokenizer.max_length <= self.model.max_len,
            f"tokenizer.max_length={self.tokenizer.max_length} exceeds model.max_len={self.model.max_len} "
            "(the positional encoding's size): lower tokenizer.max_length or raise model.max_len",
        )
        require(self.train.label_smoothing == 0.0, "train.label_smoothing: the soft targets replace it; remove it")
        pairs, extra = self.data.text_pair_column is not None, self.transfer.extra_text
        require(not (pairs and (extra.paths or extra.hf_dataset)),
                "transfer.extra_text adds single texts; for sentence pairs use transfer.pair_neighbours")
        require(pairs or not self.transfer.pair_neighbours,
                "transfer.pair_neighbours applies to sentence pairs (give data.text_pair_column, or set it to 0)")
        require(
            self.train.window == "truncate",
            "train.window: random trains on a random window per epoch, but the teacher labels each "
            "transfer text once, as truncated: remove it (tokenizer.truncation chooses the tokens kept)",
        )

    def augmentation_seed(self) -> int:
        return self.seed if self.transfer.seed is None else self.transfer.seed

    def student_config(self) -> ClassifierConfig:
        """The student's ClassifierConfig (config.yaml of the run directory: eval, export, ... read it)."""
        return ClassifierConfig(
            name=self.name, run_dir=self.run_dir, seed=self.seed, data=self.data, tokenizer=self.tokenizer,
            model=self.model, wide=self.wide, train=self.train, inference=self.inference,
        )
