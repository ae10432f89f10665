"""Other systems measured beside ours, each in the shape its users run it:

    fasttext_peer    fastText (`train_supervised`, word bigrams, and autotune on validation)
    model2vec_peer   model2vec: static embeddings distilled from the packaged MiniLM, its classifier
    fastapi_peer     the server a user writes by hand: FastAPI, one session.run a request
    setfit_peer      SetFit 1.2 (its paper's settings) in an interpreter of its own (a venv holding setfit)

Their packages come with the `bench` extra (pip install 'tfm-cls[bench]') and are imported only
when a peer is used; each peer's `available()` is None where it can run, else one line saying
what is missing.
"""

from __future__ import annotations

import importlib


def missing(*modules: str, extra: str = "bench") -> str | None:
    """None when every module imports, else one line naming the first that does not and the extra."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            return f"{module} is not installed (pip install 'tfm-cls[{extra}]'): {err}"
    return None
