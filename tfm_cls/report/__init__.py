"""`tfm-cls report`: RUN/report.html, one self-contained page on what a trained run gets wrong.

    collect.py        everything the page shows, from the run and one labelled split (writes nothing)
    page.py           the HTML: inline CSS / JS / SVG, no external asset, no network
    attribution.py    token attributions: integrated gradients through the PyTorch model
    label_errors.py   likely label errors in the training data (confident learning)

The TF-IDF baseline it shows is tfm_cls.classify.baseline, the library's one classical baseline.

`write_report(run_dir, data=None, split="test")` computes everything first and only then
replaces report.html (atomically): a bad run or bad data leaves the run directory unchanged.
docs/report.md describes the page.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def write_report(run_dir: str | Path, data: str | None = None, split: str = "test", given: Any = None) -> Path:
    """Write RUN/report.html for `split` of the run's data (or of `data`, a labelled file or
    folder; or `given`: datasets already loaded, see collect); returns its path."""
    from tfm_cls import runs as R
    from tfm_cls.io import write_text
    from tfm_cls.report.collect import collect
    from tfm_cls.report.page import render

    content = collect(run_dir, data, split, given)
    path = Path(run_dir) / R.REPORT_HTML_FILE
    write_text(path, render(content))
    logger.info("wrote %s (%.0f KB, %.1f s)", path, path.stat().st_size / 1024, content["seconds"])
    return path
