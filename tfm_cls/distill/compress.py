"""`tfm-cls compress --run TEACHER --layers 3`: one command for a student cut from a finished run.

The DistillConfig is the `cut` preset (configs/distill/cut.yaml: transfer set, loss, schedule)
with what the teacher run already says: its data section and seed (the same validation carve),
its tokenizer length, the layers kept, and a run directory beside the teacher's
(TEACHER-cut3, TEACHER-cut0-2-4, ...); KEY=VALUE overrides come last, as everywhere.
The teacher labels from its int8 file where it has one (RUN/model.int8.onnx: about twice as fast
on CPU), else from the run's PyTorch weights; the cut takes the run's weights either way.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tfm_cls import runs as R
from tfm_cls.config import (
    ClassifierConfig,
    apply_overrides,
    from_dict,
    load_config,
    merge_config,
    resolve_config_file,
    to_dict,
)
from tfm_cls.distill.config import DistillConfig
from tfm_cls.distill.cut import LayerSpec
from tfm_cls.errors import ConfigError, TeacherError

PRESET = "cut"
INT8_FILE = "model.int8.onnx"


def parse_layers(text: str) -> LayerSpec:
    """`--layers`: K (the first K layers: first:K), a comma list (0,2,4) or a named spec (spread:3).
    The first layers, because they measured best (docs/distillation.md: trec, first:3 96.2 vs spread:3 93.0)."""
    text = text.strip()
    if text.isdigit():
        return f"first:{int(text)}"
    if "," in text or text.lstrip("-").isdigit():
        try:
            return [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--layers {text}: expected K, a comma-separated list of layer indices, or first:K / "
                              "spread:K / every_other") from None
    return text


def layers_tag(spec: LayerSpec) -> str:
    """The run-name suffix of a spec: cut3 (first:3), cut-spread3, cut0-2-4, cut-every_other."""
    if isinstance(spec, list):
        return "cut" + "-".join(map(str, spec))
    if spec.startswith("first:"):
        return "cut" + spec.split(":", 1)[1]
    return "cut-" + spec.replace(":", "")


def compress_config(teacher_run: str | Path, layers: LayerSpec, overrides: list[str] | None = None,
                    preset: str = PRESET) -> DistillConfig:
    """The DistillConfig of a student cut from `teacher_run` (a finished classification run directory)."""
    run = Path(teacher_run).expanduser()
    if not (run / R.CONFIG_FILE).is_file() or not (run / R.WEIGHTS_FILE).is_file():
        raise TeacherError(f"--run {run}: not a finished classification run ({R.CONFIG_FILE} and {R.WEIGHTS_FILE} "
                           "are needed: a cut student takes the run's weights)")
    taught = load_config(ClassifierConfig, run / R.CONFIG_FILE)
    name = f"{taught.name}-{layers_tag(layers)}"
    labeller = run / INT8_FILE if (run / INT8_FILE).is_file() else run
    from_teacher = {
        "name": name, "seed": taught.seed, "run_dir": str(run.parent / f"{run.name}-{layers_tag(layers)}"),
        "data": to_dict(taught.data), "teacher": {"path": str(labeller)},
        "student": {"tokenizer": "teacher", "layers": layers},
        "tokenizer": {"max_length": taught.tokenizer.max_length},
    }
    path = resolve_config_file(preset, DistillConfig.preset_folder)
    with open(path, encoding="utf-8") as f:
        base = yaml.safe_load(f) or {}
    merged = merge_config(base, from_teacher)
    merged["data"] = from_teacher["data"]  # the teacher's data section as a whole (none of the preset's keys)
    raw = apply_overrides(merged, list(overrides or []), DistillConfig)
    return from_dict(DistillConfig, raw, f"{path} + --run {run}")
