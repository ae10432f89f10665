"""Which texts to label next (`tfm-cls suggest`, `tfm-cls label`; docs/suggest.md).

    pool.py       the unlabelled pool, streamed: duplicates and labelled texts out, a sample beyond --max-pool
    vectors.py    sentence vectors: the packaged MiniLM's mean of 256-token windows (hashed n-grams without it)
    encoder.py    that MiniLM exported to ONNX once, cached in the user's cache folder (onnxruntime runs it)
    progress.py   the vectors' progress: a bar on a terminal, else a log line every 20 s with the time left
    names.py      labels.json's names and descriptions -> the zero-shot model
    guess.py      the current model: a run's calibrated scores, logistic regression on vectors, zero-shot
    pick.py       the strategies: cover (cold start), uncertainty, spread over the pool, near-duplicates
    suggester.py  the pieces in order: Suggester.suggest, the output file
    store.py      the labelled folder: read it, append labels atomically under a lock
    page.py       the label page (one self-contained HTML string)
    server.py     `tfm-cls label`: the page's local HTTP server (Starlette + uvicorn, 127.0.0.1 only)
"""

from tfm_cls.suggest.names import LabelNames, parse_labels, read_labels
from tfm_cls.suggest.suggester import Settings, Suggester, Suggestion

__all__ = ["LabelNames", "Settings", "Suggester", "Suggestion", "parse_labels", "read_labels"]
