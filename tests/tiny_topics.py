"""The topic vocabulary of the tiny synthetic datasets the test suites make: a text's class is
given away by its topic words, so a d_model=16 model learns it in a few epochs."""

import json
from pathlib import Path

CLASSES = ["animals", "food", "sports"]
WORDS = {
    "animals": ["cat", "dog", "horse", "tiger", "bird", "fish"],
    "food": ["bread", "apple", "cheese", "pasta", "soup", "rice"],
    "sports": ["tennis", "soccer", "golf", "rugby", "boxing", "chess"],
}
FILLER = ["the", "a", "some", "very", "really", "about", "and", "with"]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
