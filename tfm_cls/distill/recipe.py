"""Task-specific knowledge distillation (`tfm-cls distill`): the distillation task on the one engine.

    distill(cfg) -> teacher checks -> data -> transfer set -> student tokenizer + model
                 -> teacher outputs (cached) -> Engine(DistillTask).fit() -> finish_run

DistillTask is a ClassificationTask whose training split is the transfer set and whose loss is
the soft-target loss mixed with cross-entropy on gold labels (tfm_cls.distill.loss); evaluation,
saving and the final test are classification's. The result is an ordinary classification run
directory (config.yaml is the student's ClassifierConfig: eval, predict, export, verify,
quantize and infer work on it unchanged), plus:

    distill_config.yaml     resolved DistillConfig, with the teacher's sha256
    teacher_outputs/        cached teacher outputs (tfm_cls.distill.labelling)
    metrics.json            as a classification run's, plus "distillation" (teacher, transfer set, timing)
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from tokenizers import Tokenizer
from torch import Tensor, nn

from tfm_cls import runs as R
from tfm_cls.classify.finish import finish_run
from tfm_cls.classify.heads import DISTILLABLE, Head, check_loss_weights, head_for
from tfm_cls.classify.task import ClassificationTask, segment_kwargs
from tfm_cls.config import ModelConfig, save_config
from tfm_cls.data.char_grams import branch_terms
from tfm_cls.data.sources import load_data
from tfm_cls.data.tokenized import TokenizedSplit, tokenize_dataset, tokenize_splits
from tfm_cls.data.tokenizer import (
    PAD,
    PAD_ID,
    auto_max_length,
    configure_truncation,
    load_tokenizer,
    long_text_of,
    max_length_of,
    resolved_lengths,
    save_tokenizer,
    train_tokenizer,
)
from tfm_cls.distill.config import DistillConfig
from tfm_cls.distill.cut import cut_student, resolve_layers
from tfm_cls.distill.labelling import teacher_outputs
from tfm_cls.distill.loss import distill_loss, hint_loss
from tfm_cls.distill.teacher import Teacher, open_teacher
from tfm_cls.distill.transfer import TransferSet, build_pair_transfer_set, build_transfer_set, gold_mask
from tfm_cls.errors import ConfigError, RunDirError, TeacherError
from tfm_cls.io import read_json, write_json
from tfm_cls.pretrain.corpus import assemble_corpus, load_extra_texts
from tfm_cls.runtime.text import LongText
from tfm_cls.training import distributed as D
from tfm_cls.training.engine import Engine, job, seed_everything, start_process
from tfm_cls.training.precision import Precision
from tfm_cls.training.tensorboard import TensorBoardSink

logger = logging.getLogger(__name__)

DISTILL_CONFIG_FILE = "distill_config.yaml"
DISTILL_FILES = (*R.CLASSIFIER_FILES, DISTILL_CONFIG_FILE)


class DistillTask(ClassificationTask):
    """Transfer-set texts with teacher outputs -> soft-target loss (+ gold cross-entropy where a
    text has a label); validation and saving as in classification."""

    name = "distillation"

    def __init__(
        self, cfg: DistillConfig, model: nn.Module, splits: dict[str, TokenizedSplit], labels: list[str],
        outputs: np.ndarray, run_dir: Path, env: D.DistEnv, amp: Precision,
    ) -> None:
        super().__init__(cfg.student_config(), model, splits, labels, run_dir, env, amp)
        self.distill_cfg = cfg
        self.has_gold = gold_mask(splits["train"].labels)  # [N]
        self.outputs = np.ascontiguousarray(outputs[:, : len(labels)])  # [N, C] logits
        self.feature_targets: np.ndarray | None = None  # [N, d_model] where loss.feature_weight > 0
        if cfg.loss.feature_weight > 0:
            self.feature_targets = pca_project(outputs[:, len(labels) :], cfg.model.d_model, 1.0, cfg.seed)
        if cfg.student.select == "last":
            self.best_metric = None  # every evaluation (and the end) saves the latest weights

    def batches(self, epoch: int, batches: list[list[int]]) -> Iterator[dict[str, Tensor]]:
        for indices, batch in zip(batches, super().batches(epoch, batches)):
            batch["teacher"] = torch.from_numpy(self.outputs[indices])  # [B, C]
            batch["has_gold"] = torch.from_numpy(self.has_gold[indices])  # [B]
            if self.feature_targets is not None:
                batch["teacher_features"] = torch.from_numpy(self.feature_targets[indices])  # [B, d_model]
            yield batch

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
        lc = self.distill_cfg.loss
        logits, pooled = model.logits_and_features(
            batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
        )  # [B, C], [B, d_model]
        loss = distill_loss(
            logits, batch["teacher"], batch["labels"], batch["has_gold"], head=self.task_head, kind=lc.soft,
            temperature=lc.temperature, gold_weight=lc.gold_weight,
        )
        if "teacher_features" in batch:
            loss = loss + lc.feature_weight * hint_loss(pooled, batch["teacher_features"])
        return loss


# ---- building blocks ------------------------------------------------------------------------------------


def checked_teacher(cfg: DistillConfig) -> tuple[Teacher, DistillConfig]:
    """The teacher, and the config with its sha256 filled in (an error if a given sha256 differs)."""
    teacher = open_teacher(cfg.teacher.path, cfg.teacher.threads)
    if cfg.data.task not in DISTILLABLE:
        raise ConfigError(f"data.task={cfg.data.task}: tfm-cls distill takes {' and '.join(DISTILLABLE)} tasks")
    if teacher.head != cfg.data.task:
        raise TeacherError(f"teacher.path={cfg.teacher.path} is a {teacher.head} model, but data.task={cfg.data.task}")
    pairs = cfg.data.text_pair_column is not None
    if teacher.pair != pairs:
        raise TeacherError(
            f"teacher.path={cfg.teacher.path} reads {'sentence pairs' if teacher.pair else 'single texts'}, but the data "
            + ("has data.text_pair_column" if pairs else "has no data.text_pair_column")
        )
    cfg = with_cut_architecture(cfg, teacher)
    if cfg.loss.feature_weight > 0 and not teacher.feature_width():
        raise ConfigError(
            f"loss.feature_weight={cfg.loss.feature_weight} needs the teacher's pooled vectors, which the ONNX file "
            f"{cfg.teacher.path} does not output: give teacher.path as the teacher's run directory"
        )
    if cfg.loss.feature_weight > 0 and cfg.model.d_model > teacher.feature_width():
        raise ConfigError(
            f"loss.feature_weight: the student's d_model={cfg.model.d_model} exceeds the teacher's width "
            f"{teacher.feature_width()}; the hint projects the teacher's pooled vector down to d_model"
        )
    if cfg.teacher.sha256 and cfg.teacher.sha256 != teacher.sha256:
        raise TeacherError(
            f"teacher.path={cfg.teacher.path} has sha256 {teacher.sha256}, but teacher.sha256 asks for "
            f"{cfg.teacher.sha256}: the teacher changed"
        )
    return teacher, dataclasses.replace(cfg, teacher=dataclasses.replace(cfg.teacher, sha256=teacher.sha256))


def cut_layers(cfg: DistillConfig, teacher: Teacher) -> list[int] | None:
    """The teacher layers a cut student keeps (student.layers resolved), None for a from-scratch one;
    a ConfigError (out of range, too many) before any work."""
    if cfg.student.layers is None:
        return None
    source = teacher.source_run(f"student.layers={cfg.student.layers}")
    return resolve_layers(cfg.student.layers, int(source.model_config["num_layers"]))


def with_cut_architecture(cfg: DistillConfig, teacher: Teacher) -> DistillConfig:
    """For a student cut from the teacher: the config whose `model` section is the teacher's
    architecture with the kept number of layers (what config.yaml will say); others unchanged."""
    layers = cut_layers(cfg, teacher)
    if layers is None:
        return cfg
    arch = teacher.source_run(f"student.layers={cfg.student.layers}").model_config
    if cfg.model != ModelConfig():
        logger.warning("student.layers=%s: the model section is not used; a cut student has the teacher's "
                       "architecture (d_model %s, %s heads)", cfg.student.layers, arch["d_model"], arch["nhead"])
    length = cfg.tokenizer.max_length
    if length != "auto" and length > int(arch["max_len"]):
        raise ConfigError(
            f"tokenizer.max_length={length} exceeds the teacher's {arch['max_len']} positions, which a student cut "
            f"from it keeps: lower tokenizer.max_length to at most {arch['max_len']}"
        )
    kept = {f.name: arch[f.name] for f in dataclasses.fields(ModelConfig) if f.name in arch}
    model = ModelConfig(**{**kept, "num_layers": len(layers), "segment_embedding": bool(arch.get("type_vocab_size"))})
    return dataclasses.replace(cfg, model=model)


def prepare_run_dir(cfg: DistillConfig, *, resume: bool, overwrite: bool) -> Path:
    """runs.prepare_run_dir for a distillation; a run killed while the teacher labelled (no
    checkpoint yet) resumes too: its cached teacher outputs are kept (they live outside DISTILL_FILES)."""
    run_dir = cfg.resolved_run_dir()
    if resume and not (run_dir / R.LAST_CHECKPOINT).is_file():
        if not (run_dir / DISTILL_CONFIG_FILE).is_file():
            raise RunDirError(f"--resume: {run_dir} holds no distillation run to resume ({DISTILL_CONFIG_FILE} missing)")
        saved = R.config_differences(
            R.read_saved_config(run_dir / DISTILL_CONFIG_FILE, DistillConfig),
            dataclasses.asdict(cfg),
        )
        if saved:
            shown = ", ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in saved[:5])
            raise RunDirError(f"{run_dir} holds a different distillation run ({shown}); resume it with its own config")
        resume = False  # nothing trained yet: start training, keep the teacher outputs
    return R.prepare_run_dir(
        cfg, config_file=DISTILL_CONFIG_FILE, run_files=DISTILL_FILES, kind="distillation ", resume=resume,
        overwrite=overwrite,
    )


def student_tokenizer(cfg: DistillConfig, teacher: Teacher, texts: list[str]) -> Tokenizer:
    """The student's tokenizer: the teacher's or one trained on `texts` (the training + extra
    texts), truncating at tokenizer.max_length; `auto` measures `texts` (tokenizer.auto_max_length)."""
    limit = None if cfg.model.max_len == "auto" else cfg.model.max_len
    if cfg.student.tokenizer == "teacher":
        tokenizer = teacher.tokenizer()
        length = cfg.tokenizer.max_length
        if length == "auto":
            length = auto_max_length(tokenizer, texts, cfg.tokenizer, limit)
        tokenizer = configure_truncation(tokenizer, length)
        if limit is not None and max_length_of(tokenizer) > limit:
            raise ConfigError(f"tokenizer.max_length={max_length_of(tokenizer)} exceeds model.max_len={limit}")
        return tokenizer
    return train_tokenizer(texts, cfg.tokenizer, limit)


def pca_project(matrix: np.ndarray, d_model: int, std: float, seed: int) -> np.ndarray:
    """Rows of `matrix` [N, d_teacher] projected on its first d_model principal axes, scaled to `std`."""
    from sklearn.decomposition import PCA

    if d_model > min(matrix.shape):
        raise ConfigError(f"d_model={d_model} exceeds the teacher's width {matrix.shape[1]}: the PCA cannot keep that many axes")
    projected = PCA(n_components=d_model, svd_solver="full", random_state=seed).fit_transform(matrix.astype(np.float64))
    return (projected * (std / projected.std())).astype(np.float32)  # [N, d_model]


def build_student(cfg: DistillConfig, tokenizer: Tokenizer, num_classes: int, teacher: Teacher) -> nn.Module:
    pad_id = (tokenizer.padding or {}).get("pad_id", tokenizer.token_to_id(PAD))
    pad_id = PAD_ID if pad_id is None else int(pad_id)
    seed_everything(cfg.seed)  # the student's initial weights do not depend on what ran before
    layers = cut_layers(cfg, teacher)
    if layers is not None:
        source = teacher.source_run(f"student.layers={cfg.student.layers}")
        logger.info("student: teacher layers %s of %s, with its embeddings and head", layers, source.model_config["num_layers"])
        return cut_student(source.model_config, source.state_dict(), layers)
    entries, char_table = branch_terms(cfg.wide, tokenizer, tokenizer.get_vocab_size())
    model = R.build_model(dict(
        vocab_size=tokenizer.get_vocab_size(), num_classes=num_classes, pad_token_id=pad_id, **cfg.model.model_kwargs(),
        **cfg.wide.model_kwargs(), **entries,
        **segment_kwargs(cfg),
    ))
    if char_table is not None:
        model.wide.set_char_grams(char_table)
    init_from = cfg.student.embedding_init
    if init_from != "random":
        started = time.perf_counter()
        if init_from == "teacher_pca":
            matrix = teacher.token_embeddings()  # [V, d_teacher]
        else:
            matrix = teacher.token_outputs(cfg.teacher.batch_size * 4)  # [V, d_teacher]
        matrix = matrix[: tokenizer.get_vocab_size()]
        weight = model.token_embedding.embedding.weight
        init = pca_project(matrix, cfg.model.d_model, float(weight.detach().std()), cfg.seed)
        with torch.no_grad():
            weight[: len(init)] = torch.from_numpy(init)
            weight[pad_id].zero_()
        what = "input embeddings" if init_from == "teacher_pca" else "outputs for single tokens"
        logger.info("student token embeddings: PCA of the teacher's %s %s (%.1f s)", matrix.shape, what,
                    time.perf_counter() - started)
    return model


def transfer_split(transfer: TransferSet, tokenizer: Tokenizer, policy: LongText | None = None) -> TokenizedSplit:
    """The transfer set tokenized as the student trains on it: one row per text, cut by the
    policy's truncation strategy (the teacher labelled each text once, so no windows)."""
    columns = {"text": transfer.texts, "label": transfer.labels.tolist()}
    if transfer.pairs is not None:
        columns["text_pair"] = transfer.pairs
    ds = Dataset.from_dict(columns)
    policy = dataclasses.replace(policy, chunk=False) if policy is not None else None
    return tokenize_dataset(ds, tokenizer, "tokenize transfer set", policy)


def transfer_set(cfg: DistillConfig, data, extra: list[str]) -> TransferSet:
    """The transfer set of single texts (with `extra`) or of sentence pairs (never a held-out pair)."""
    train = data.splits["train"]
    if "text_pair" not in train.column_names:
        return build_transfer_set(list(train["text"]), train["label"], extra, cfg.transfer, cfg.augmentation_seed())
    held_out = [pair for k in ("validation", "test") for pair in zip(data.splits[k]["text"], data.splits[k]["text_pair"])]
    return build_pair_transfer_set(
        list(train["text"]), list(train["text_pair"]), train["label"], held_out, cfg.transfer, cfg.augmentation_seed(),
        regression=head_for(cfg.student_config()).value_target,
    )


def teacher_agreement(teacher_logits: np.ndarray, gold: np.ndarray, head: Head) -> tuple[str, float | None]:
    """How well the teacher fits the gold training labels: the head's metric name and value
    (accuracy, or Pearson r for regression)."""
    name, value, _ = head.gate(head.scores(teacher_logits), gold)
    return name, None if len(gold) < 2 else value  # undefined (metrics.json holds strict JSON: no NaN)


def extra_texts(cfg: DistillConfig, data) -> list[str]:
    """Extra unlabelled text that holds no test or validation text (the MLM corpus's guard)."""
    ec = cfg.transfer.extra_text
    if not ec.paths and not ec.hf_dataset:
        return []
    held_out = list(data.splits["test"]["text"]) + list(data.splits["validation"]["text"])
    loaded = load_extra_texts(ec, cfg.augmentation_seed())
    corpus, _ = assemble_corpus([], loaded, held_out, ec.on_overlap, ngram=ec.overlap_ngram, min_piece=ec.overlap_min_piece)
    return corpus


# ---- the job ------------------------------------------------------------------------------------------------


def _student(cfg: DistillConfig, teacher: Teacher, data: Any, vocabulary_texts: list[str], run_dir: Path,
             resume: bool) -> tuple[DistillConfig, nn.Module, Tokenizer]:
    """The student and its tokenizer, with `cfg`'s `auto` lengths resolved to the numbers chosen
    (config.yaml; distill_config.yaml keeps `auto`). On resume, exactly what the interrupted run
    built (the weights come from the checkpoint)."""
    if resume:
        tokenizer = load_tokenizer(run_dir / R.TOKENIZER_FILE)
        model = R.build_model(read_json(run_dir / R.MODEL_CONFIG_FILE))
        return resolved_lengths(cfg, max_length_of(tokenizer), model.config["max_len"]), model, tokenizer
    tokenizer = student_tokenizer(cfg, teacher, vocabulary_texts)
    length = max_length_of(tokenizer)
    cfg = resolved_lengths(cfg, length, length if cfg.model.max_len == "auto" else cfg.model.max_len)
    model = build_student(cfg, tokenizer, len(data.labels), teacher)
    if cfg.student.layers is None:  # a cut student keeps the teacher's head as it is
        head_for(cfg.student_config()).start_output(model, data.splits["train"]["label"])
    return cfg, model, tokenizer


def distill(cfg: DistillConfig, *, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Label the transfer set with the teacher, train the student, write the run directory;
    returns the contents of metrics.json. One process (the teacher labels on this machine)."""
    teacher, cfg = checked_teacher(cfg)  # before anything is written: a missing / foreign teacher fails here
    check_loss_weights(cfg.student_config(), teacher.labels)  # a {label: weight} of other names, too
    train_resume = resume and (cfg.resolved_run_dir() / R.LAST_CHECKPOINT).is_file()
    with job(cfg.train.device, lambda: prepare_run_dir(cfg, resume=resume, overwrite=overwrite)) as (env, run_dir):
        if env.distributed:
            raise ConfigError("tfm-cls distill runs in one process (the teacher labels on this machine); run it without torchrun")
        amp = start_process(cfg.train, cfg.seed, env)
        data = load_data(cfg.data)
        if teacher.labels != data.labels:
            raise TeacherError(
                f"the teacher's label names {teacher.labels} differ from the data's {data.labels} "
                f"(teacher {cfg.teacher.path}, data {data.source}); distil on the data the teacher was trained for"
            )
        extra = extra_texts(cfg, data)
        train_texts = list(data.splits["train"]["text"])
        transfer = transfer_set(cfg, data, extra)
        if transfer.pairs is not None:
            train_texts = [*train_texts, *data.splits["train"]["text_pair"]]  # what the student's vocabulary sees
        asked = cfg  # as given (`auto` lengths kept): distill_config.yaml
        cfg, model, tokenizer = _student(cfg, teacher, data, train_texts + extra, run_dir, train_resume)
        student_params, teacher_params = sum(p.numel() for p in model.parameters()), teacher.num_parameters()
        if student_params >= teacher_params:
            logger.warning(
                "the student (%.2fM parameters) is not smaller than the teacher (%.2fM): distillation usually "
                "aims at a smaller, faster model", student_params / 1e6, teacher_params / 1e6,
            )
        model.to(env.device)
        save_config(asked, run_dir / DISTILL_CONFIG_FILE)
        save_config(cfg.student_config(), run_dir / R.CONFIG_FILE)
        write_json(run_dir / R.MODEL_CONFIG_FILE, model.config)
        write_json(run_dir / R.LABELS_FILE, data.labels)
        save_tokenizer(tokenizer, run_dir / R.TOKENIZER_FILE)

        transfer_sha256 = transfer.fingerprint()  # keys the teacher-output cache; recorded in metrics.json
        outputs, label_report = teacher_outputs(
            teacher, transfer.texts, transfer_sha256, run_dir, chunk_size=cfg.teacher.chunk_size,
            batch_size=cfg.teacher.batch_size, resume=resume, progress=cfg.train.progress,
            features=cfg.loss.feature_weight > 0, pairs=transfer.pairs,
        )
        gold = transfer.has_gold
        fit_name, agreement = teacher_agreement(outputs[gold, : len(data.labels)], transfer.labels[gold], head_for(cfg.student_config()))
        policy = long_text_of(cfg.tokenizer, cfg.inference)  # truncation / chunking, as eval and inference will apply them
        splits = {"train": transfer_split(transfer, tokenizer, policy),
                  **tokenize_splits({k: data.splits[k] for k in ("validation", "test")}, tokenizer, policy)}
        task = DistillTask(cfg, model, splits, data.labels, outputs, run_dir, env, amp)
        logger.info(
            "student: %.2fM parameters (teacher %.2fM), %d layers, d_model %d, vocabulary %d (%s tokenizer); "
            "transfer set %d texts (%d with gold labels; teacher %s %s on them)",
            student_params / 1e6, teacher_params / 1e6, len(model.encoder.layers), model.config["d_model"],
            tokenizer.get_vocab_size(), cfg.student.tokenizer, len(transfer), int(gold.sum()),
            fit_name, "n/a" if agreement is None else f"{agreement:.3f}",
        )
        board = TensorBoardSink.open(run_dir, cfg.train.tensorboard, fresh=not train_resume) if env.is_main else None
        try:
            engine = Engine(task, cfg.train, env, amp, run_dir, sinks=[board] if board else None)
            state = engine.fit(train_resume)
            report = {
                "teacher": {"path": str(cfg.teacher.path), "kind": teacher.kind, "sha256": teacher.sha256,
                            "num_parameters": teacher_params, "train_agreement": agreement},
                "transfer_set": {**transfer.report, "sha256": transfer_sha256},
                **label_report,
                "selected": cfg.student.select,
                "student_layers": cut_layers(cfg, teacher),
            }
            return finish_run(task, data, state, state.epoch + state.position / engine.batches_per_epoch, board,
                              extra={"distillation": report})
        finally:
            if board is not None:
                board.close()
