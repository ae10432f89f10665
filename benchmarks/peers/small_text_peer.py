"""The small-text peer (Schröder et al., small-text 1.4): its query strategies on the same frozen
MiniLM vectors and the same logistic regression the tool's proxy uses, as a user of small-text
with a scikit-learn classifier runs them (`PoolBasedActiveLearner`, `SklearnClassifierFactory`).

small-text is not a dependency of this project, so it runs in an interpreter of its own
(`--small-text-python`, default DEFAULT_PYTHON: a venv with `pip install small-text==1.4.*`) as a
separate process; this file is also that process's script. Imported, it uses the standard library
only; run by path (`PYTHON small_text_peer.py INPUT.npz OUTPUT.json`) it reads the pool vectors and
labels, the initial labelled rows and the round sizes, runs each strategy's loop, and writes the
labelled rows after every round. The caller scores them with the same proxy as every other row.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

DEFAULT_PYTHON = Path("/tmp/peers-venv/bin/python")
STRATEGIES = ("breaking_ties", "prediction_entropy", "greedy_coreset", "contrastive_al")
"""small-text's strongest strategies on few labels in its authors' comparisons (breaking ties, the
margin; entropy; greedy coreset; contrastive active learning), all usable with a scikit-learn model."""


def available(python: str | Path = DEFAULT_PYTHON) -> str | None:
    """None when `python` has small-text 1.x, else the reason (one line)."""
    python = Path(python)
    if not python.is_file():
        return f"no small-text interpreter at {python} (a venv with `pip install small-text==1.4.*`)"
    done = subprocess.run([str(python), "-c", "import small_text; print(small_text.__version__)"],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not done.stdout.startswith("1."):
        return f"{python} lacks small-text 1.x ({done.stderr.strip().splitlines()[-1:] or done.stdout.strip()})"
    return None


def run_small_text(inputs: str | Path, output: str | Path, python: str | Path = DEFAULT_PYTHON) -> dict[str, Any]:
    """Run the peer's loops (inputs: an .npz written by the caller, see `_main`); returns its JSON."""
    done = subprocess.run([str(python), str(Path(__file__).resolve()), str(inputs), str(output)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"small-text peer failed: {done.stderr[-2000:]}")
    return json.loads(Path(output).read_text())


def _strategy(name: str):
    from small_text import BreakingTies, ContrastiveActiveLearning, GreedyCoreset, PredictionEntropy

    return {"breaking_ties": BreakingTies, "prediction_entropy": PredictionEntropy,
            "greedy_coreset": GreedyCoreset, "contrastive_al": ContrastiveActiveLearning}[name]()


def _main(inputs: str, output: str) -> None:
    """INPUT.npz: x [N, D] pool vectors, y [N], initial [M] rows labelled first (per seed: keys
    initial_<seed>), rounds [R] texts per round, seeds, c (the LR's C). OUTPUT.json:
    {strategy: {seed: [[rows labelled after round 1], ...]}}."""
    import warnings

    import numpy as np
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression
    from small_text import PoolBasedActiveLearner, SklearnClassifier, SklearnClassifierFactory, SklearnDataset

    class VectorClassifier(SklearnClassifier):
        """small-text's scikit-learn classifier whose embedding is its input vector (the frozen
        MiniLM vector), so the embedding strategies (coreset, CAL) run on the same vectors."""

        def embed(self, data_set, return_proba=False, pbar=None, **kwargs):
            x = data_set.x
            return (x, self.predict_proba(data_set)) if return_proba else x

    class VectorClassifierFactory(SklearnClassifierFactory):
        def new(self):
            return VectorClassifier(clone(self.base_estimator), self.num_classes, **self.kwargs)

    warnings.filterwarnings("ignore")
    data = np.load(inputs)
    x, y = data["x"].astype(np.float64), data["y"].astype(np.int64)
    classes = int(y.max()) + 1
    result: dict[str, Any] = {}
    for name in [str(s) for s in data["strategies"]]:
        result[name] = {}
        for seed in [int(s) for s in data["seeds"]]:
            np.random.seed(seed)
            factory = VectorClassifierFactory(LogisticRegression(C=float(data["c"]), max_iter=1000), classes)
            learner = PoolBasedActiveLearner(factory, _strategy(name), SklearnDataset(x, y))
            initial = data[f"initial_{seed}"].astype(np.int64)
            learner.initialize_data(initial, y[initial])
            rounds = []
            for n in data["rounds"]:
                picked = learner.query(num_samples=int(n))
                learner.update(y[picked])
                rounds.append([int(i) for i in learner.indices_labeled])
            result[name][str(seed)] = rounds
    Path(output).write_text(json.dumps(result))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
