"""The pool vectors' progress: a log line at most every LOG_EVERY seconds where there is no terminal,
saying how far and how long is left; a tqdm bar on a terminal; Suggester.encode feeds it as the
vectorizer's batches finish."""

import logging

import numpy as np

import tfm_cls.suggest.progress as progress_module
from tfm_cls.suggest.pool import collect
from tfm_cls.suggest.progress import Progress
from tfm_cls.suggest.suggester import Suggester


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_log_lines_at_most_every_interval_with_the_time_left(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="tfm_cls.suggest"):
        bar = Progress(3000, tty=False, every=20.0, clock=clock)
        for second in range(1, 101):  # 30 texts a second for 100 s
            clock.now = float(second)
            bar.advance_to(30 * second)
        bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 7  # at once, at 20, 40, 60, 80, 100 s, and the closing line
    assert lines[0] == "pool vectors: 3000 texts to go"
    assert lines[1] == "pool vectors: 600 of 3000 texts (20%), 30 texts/s, about 80 s left"
    assert lines[4].endswith("about 20 s left") and lines[-1] == "pool vectors: 3000 texts in 1 min 40 s"


def test_a_short_run_says_only_that_it_starts_and_long_times_read_as_minutes(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger="tfm_cls.suggest"):
        bar = Progress(100, tty=False, clock=clock)
        clock.now = 3.0
        bar.advance_to(100)
        bar.close()
    assert [r.getMessage() for r in caplog.records] == ["pool vectors: 100 texts to go"]
    bar = Progress(100_000, tty=False, clock=clock)
    clock.now = 33.0
    bar.advance_to(1000)
    assert bar.line().endswith("1000 of 100000 texts (1%), 33 texts/s, about 49 min 30 s left")  # 30 s since it began


def test_a_terminal_gets_a_bar(capsys):
    bar = Progress(10, tty=True)
    assert bar.bar is not None
    bar.advance_to(4.5)
    bar.advance_to(10)
    assert bar.bar.n == 10
    bar.close()


class ReportingVectors:
    """A vectorizer that reports its share done after each of three batches."""

    name = "reporting"
    unk_id = None
    accepts_progress = True

    def __init__(self):
        self.shares = []

    def unknown_share(self, texts):
        return np.zeros(len(texts), np.float32)

    def __call__(self, texts, progress=None):
        for share in (0.25, 0.5, 1.0):
            self.shares.append(share)
            if progress is not None:
                progress(share)
        out = np.random.default_rng(len(texts)).normal(size=(len(texts), 8)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_suggester_reports_the_pool_vectors_as_they_go(monkeypatch, caplog):
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)  # every update logged
    monkeypatch.setattr("tfm_cls.suggest.suggester.CHUNK", 4)
    vectors = ReportingVectors()
    with caplog.at_level(logging.INFO, logger="tfm_cls.suggest"):
        Suggester(collect(enumerate([f"text {i}" for i in range(10)], 1)), vectors)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pool vectors:")]
    assert lines[0] == "pool vectors: 10 texts to go" and lines[1].startswith("pool vectors: 1 of 10 texts") and "pool vectors: 10 of 10 texts (100%)" in lines[-2]
    assert len(vectors.shares) == 9  # three chunks of at most 4 texts, three batches each
