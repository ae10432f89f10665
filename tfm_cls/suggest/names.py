"""Label names and descriptions -> a zero-shot first model.

labels.json may give each label a short description: `{"neg": "a negative review", ...}` (keys in
index order); the plain list (`["neg", "pos"]`) and `{name: index}` still work. The vectors of the
descriptions (else of the names) are class prototypes: a text's zero-shot scores are the softmax
of its cosines to them. Names that say what they mean carry signal ("negative" / "positive": 65.8 %
on movie reviews in issue 43), codes do not ("neg" / "pos": 56.5 %), so a description is worth a
line of JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from tfm_cls.errors import DataError

ZERO_SHOT_TEMPERATURE = 0.05
"""Cosines / this -> softmax. MiniLM's cosines to the prototypes differ by a few hundredths between
classes; at 0.05 the zero-shot scores of the descriptions in benchmarks.suggest are near their best
test NLL on all three sets and roughly calibrated (ECE 0.08 ag_news, 0.06 sst2, 0.06 trec; at 0.02:
0.10 / 0.19 / 0.24, at 0.1: 0.27 / 0.05 / 0.16)."""


@dataclasses.dataclass(frozen=True)
class LabelNames:
    """The labels in index order and, for each, its description (None where none is given)."""

    names: list[str]
    descriptions: list[str | None]

    @property
    def described(self) -> bool:
        return any(self.descriptions)

    def prompts(self) -> list[str]:
        """What stands for each label in vector space: its description, else its name (with '_' /
        '-' / '/' read as spaces: `sci/tech` -> `sci tech`)."""
        return [d if d else n.replace("_", " ").replace("-", " ").replace("/", " ")
                for n, d in zip(self.names, self.descriptions)]


def parse_labels(value: object, where: str) -> LabelNames:
    """A labels.json's content: a list of names, {name: index} or {name: description}."""
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        names, descriptions = list(value), [v.strip() or None for v in value.values()]
    elif isinstance(value, dict) and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        names = [n for n, _ in sorted(value.items(), key=lambda kv: kv[1])]
        descriptions = [None] * len(names)
    elif isinstance(value, list):
        names, descriptions = value, [None] * len(value)
    else:
        names, descriptions = [], []
    if not names or not all(isinstance(n, str) and n for n in names):
        raise DataError(f"{where}: expected a list of label names, {{name: index}} or {{name: description}}, "
                        f"got {str(value)[:100]}")
    if len(set(names)) != len(names):
        raise DataError(f"{where}: a label name appears more than once")
    return LabelNames(list(names), descriptions)


def read_labels(path: str | Path) -> LabelNames:
    """The label names (and descriptions) of a labels.json."""
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read the label names ({err})") from err
    return parse_labels(value, str(path))


def zero_shot_proba(vectors: np.ndarray, prototypes: np.ndarray, temperature: float = ZERO_SHOT_TEMPERATURE) -> np.ndarray:
    """[N, C] softmax over classes of the cosines of unit `vectors` [N, D] to unit `prototypes` [C, D]."""
    logits = vectors @ prototypes.T / temperature  # [N, C]
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)
