"""Two tiny runs of noisy data, the same seed: one calibrated (the default), one with
train.calibration=none. Their validation split is not separable (a fifth of the labels are
flipped), so the fitted temperature is an interior minimum, not the clipped bound."""

import json
import random

import pytest
from kits.tiny_topics import CLASSES, tiny_config, write_topic_data

from tfm_cls.train import train


def noisy_data(folder, share=0.2, seed=0):
    write_topic_data(folder, sizes=(90, 60, 60))
    rng = random.Random(seed)
    for split in ("train", "validation", "test"):
        path = folder / f"{split}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            if rng.random() < share:
                row["label"] = (row["label"] + rng.randint(1, len(CLASSES) - 1)) % len(CLASSES)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture(scope="session")
def noisy(tmp_path_factory):
    return noisy_data(tmp_path_factory.mktemp("noisy") / "data")


@pytest.fixture(scope="session")
def runs(tmp_path_factory, noisy):
    """{"calibrated": run dir, "raw": run dir} (train.calibration auto / none)."""
    out = {}
    for name, extra in (("calibrated", []), ("raw", ["train.calibration=none"])):
        run = tmp_path_factory.mktemp(name) / "run"
        train(tiny_config(noisy, run, "train.epochs=4", *extra))
        out[name] = run
    return out
