"""Students cut from the teacher: a chosen subset of its encoder layers, with its embeddings, width,
heads, pooling and classification head (DistilBERT's every-other-layer start; PKD's first layers;
MiniLM-L3 / L6 as cuts of L12).

    student.layers: [0, 2, 4]     those teacher layers, in that order (sorted, distinct, in range)
    student.layers: first:3       the first 3 (0, 1, 2)
    student.layers: every_other   0, 2, 4, ... (DistilBERT)
    student.layers: spread:3      3 layers spread evenly, ending at the last (6 layers: 1, 3, 5;
                                  12 layers: 3, 7, 11 as MiniLM-L3)

`check_layer_spec` runs in the config (a bad spec fails before anything is opened); `resolve_layers`
needs the teacher's depth (checked before any work too). Keeping every layer gives the teacher back
exactly (tested: equal logits).
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor, nn

from tfm_cls.errors import ConfigError

LayerSpec = list[int] | str | int
NAMED = ("first:K", "spread:K", "every_other")
_COUNTED = re.compile(r"^(first|spread):(\d+)$")
LAYER_PREFIX = "encoder.layers."


def check_layer_spec(spec: LayerSpec) -> None:
    """What can be checked without the teacher: a sorted list of distinct indices >= 0, or one of NAMED."""
    if isinstance(spec, int):  # a bare count says neither which layers nor how they are chosen
        raise ValueError(f"student.layers={spec}: give the layers ([0, 2, 4]) or how to choose them "
                         f"(first:{spec}, spread:{spec}, every_other)")
    if isinstance(spec, str):
        match = _COUNTED.match(spec.strip())
        if spec.strip() == "every_other":
            return
        if not match:
            raise ValueError(f"student.layers={spec!r}: expected a list of teacher layer indices or one of {list(NAMED)}")
        if int(match.group(2)) < 1:
            raise ValueError(f"student.layers={spec!r}: keep at least one layer")
        return
    if not spec:
        raise ValueError("student.layers: the list is empty; keep at least one teacher layer (e.g. [0, 2, 4])")
    if any(i < 0 for i in spec):
        raise ValueError(f"student.layers={spec}: layer indices count from 0; got a negative one")
    repeated = sorted({i for i in spec if spec.count(i) > 1})
    if repeated:
        raise ValueError(f"student.layers={spec}: layer(s) {repeated} repeated; each teacher layer is kept at most once")
    if list(spec) != sorted(spec):
        raise ValueError(f"student.layers={spec}: give the layers in increasing order (the student keeps the teacher's order)")


def resolve_layers(spec: LayerSpec, teacher_layers: int) -> list[int]:
    """The teacher layer indices a spec keeps, for a teacher of `teacher_layers` layers."""
    try:
        check_layer_spec(spec)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if isinstance(spec, list):
        outside = [i for i in spec if i >= teacher_layers]
        if outside:
            raise ConfigError(
                f"student.layers={spec}: layer(s) {outside} out of range; the teacher has {teacher_layers} "
                f"layers (0..{teacher_layers - 1})"
            )
        return list(spec)
    spec = spec.strip()
    if spec == "every_other":
        return list(range(0, teacher_layers, 2))
    kind, count = _COUNTED.match(spec).groups()
    k = int(count)
    if k > teacher_layers:
        raise ConfigError(f"student.layers={spec}: asks for {k} layers; the teacher has {teacher_layers}")
    if kind == "first":
        return list(range(k))
    return [(i + 1) * teacher_layers // k - 1 for i in range(k)]  # spread: distinct since k <= teacher_layers


def cut_model_config(teacher_config: dict[str, Any], layers: list[int]) -> dict[str, Any]:
    """The student's constructor arguments: the teacher's, with len(layers) encoder layers."""
    return {**teacher_config, "num_layers": len(layers)}


def cut_state_dict(teacher_state: dict[str, Tensor], layers: list[int]) -> dict[str, Tensor]:
    """The teacher's weights with encoder layer layers[i] renamed to layer i; other layers dropped,
    everything else (embeddings, final norm, pooler, head) kept."""
    new_index = {old: new for new, old in enumerate(layers)}
    state = {}
    for name, tensor in teacher_state.items():
        if not name.startswith(LAYER_PREFIX):
            state[name] = tensor.clone()
            continue
        index, rest = name[len(LAYER_PREFIX) :].split(".", 1)
        if int(index) in new_index:
            state[f"{LAYER_PREFIX}{new_index[int(index)]}.{rest}"] = tensor.clone()
    return state


def cut_student(teacher_config: dict[str, Any], teacher_state: dict[str, Tensor], layers: list[int]) -> nn.Module:
    """A TransformerClassifier holding the teacher's `layers` (and everything around them)."""
    from tfm_cls import runs as R

    with torch.random.fork_rng(devices=[]):  # the throw-away initial weights leave the caller's RNG alone
        model = R.build_model(cut_model_config(teacher_config, layers))
    model.load_state_dict(cut_state_dict(teacher_state, layers), strict=True)
    return model
