"""Texts of the long-document tests: a tiny vocabulary, short texts and texts many windows long."""

from __future__ import annotations

import random

LABELS = ["alpha", "beta", "gamma"]
MAX_LENGTH = 12  # 10 text tokens + [CLS] + [SEP] per row

WORDS = ("cat dog sun rain tree bird fish moon star rock leaf wind snow fire lake hill road ship gold salt").split()


def texts(n: int, seed: int, low: int = 1, high: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))) for _ in range(n)]


TEXTS = [" ".join(WORDS)] * 3 + texts(40, 0)
