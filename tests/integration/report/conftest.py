"""Five tiny finished runs, one per kind of output (single-label, multi-label, sentence-pair
single-label, sentence-pair regression) and a single-label run with candidates to choose among
(a warm-started wide branch), and their reports, made once per session."""

import pytest
from kits import tasks_tiny as T
from kits.tiny_topics import write_topic_data

from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.report import write_report
from tfm_cls.train import train

KINDS = {
    "single": ("topics", []),
    "multi_label": ("multi_label", T.MULTI_LABEL),
    "pair": ("pairs", T.PAIRS),
    "regression": ("pairs", T.REGRESSION),
    # a warm-started bag-of-words branch: two candidates, and the one shipped may have no encoder
    "wide": ("topics", ["wide.enabled=true", "wide.weighting=tfidf", "wide.warm_start=true", "wide.ngrams=2",
                        "wide.buckets=512", "train.eval_at_start=true"]),
}


@pytest.fixture(scope="session")
def report_data(tmp_path_factory):
    base = tmp_path_factory.mktemp("report_data")
    return {"topics": write_topic_data(base / "topics"), "multi_label": T.multi_label_data(base / "ml"),
            "pairs": T.pair_data(base / "pairs")}


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory, report_data):
    """kind -> a finished run directory with its report.html written."""
    runs = {}
    for kind, (data, extra) in KINDS.items():
        run = tmp_path_factory.mktemp(kind) / "run"
        train(load_config(ClassifierConfig, None, T.overrides(report_data[data], run, *extra)))
        write_report(run)
        runs[kind] = run
    return runs
