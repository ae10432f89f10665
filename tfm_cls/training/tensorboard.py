"""TensorBoard event files of a run (RUN/tensorboard/): a ScalarSink for the training engine.

    sink = TensorBoardSink.open(run_dir, cfg.train.tensorboard)   # None: off, or not installed
    Engine(task, ..., sinks=[sink] if sink else [])                # train/*, validation/* scalars
    sink.image_file("test/confusion_matrix", png, step); sink.text("config", yaml_text, step); sink.close()

Writing only records numbers the engine already computed: it touches no random generator and no
tensor, so a run with TensorBoard on trains bit for bit like one with it off. `tensorboard` is an
optional extra (`pip install tfm-cls[tensorboard]`); without it the first `open` logs one warning
and training goes on.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TENSORBOARD_DIR = "tensorboard"
"""Folder of the event files inside a run directory (`tensorboard --logdir RUN/tensorboard`)."""

_warned = False


def _summary_writer_class() -> Any:
    """torch's SummaryWriter, or None (with one warning per process) when tensorboard is missing."""
    global _warned
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:  # torch raises ImportError when the tensorboard package is absent
        if not _warned:
            _warned = True
            logger.warning(
                "TensorBoard logging is off: %s (install it with `pip install tfm-cls[tensorboard]`, "
                "or set train.tensorboard=false to silence this)", err,
            )
        return None
    return SummaryWriter


class TensorBoardSink:
    """Scalars, figures and text of one run, written to `log_dir` by a torch SummaryWriter."""

    def __init__(self, writer: Any, log_dir: Path) -> None:
        self.writer, self.log_dir = writer, log_dir

    @classmethod
    def open(cls, run_dir: str | Path, enabled: bool = True, *, fresh: bool = True) -> TensorBoardSink | None:
        """The sink of `run_dir`/tensorboard, or None when `enabled` is false or tensorboard is not
        installed. `fresh` (a new run, not a resume) removes the event files of an earlier run first,
        so the curves shown are this run's only."""
        if not enabled:
            return None
        writer_class = _summary_writer_class()
        if writer_class is None:
            return None
        log_dir = Path(run_dir) / TENSORBOARD_DIR
        if fresh and log_dir.is_dir():
            shutil.rmtree(log_dir)
        return cls(writer_class(log_dir=str(log_dir)), log_dir)

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """The engine's ScalarSink hook: one scalar per tag at `step`."""
        for tag, value in values.items():
            self.writer.add_scalar(tag, float(value), global_step=step)

    def image_file(self, tag: str, path: str | Path, step: int) -> None:
        """A PNG the run wrote (e.g. confusion_matrix.png), shown as an image."""
        from matplotlib.image import imread

        pixels = imread(str(path))  # [height, width, channels] floats in [0, 1]
        self.writer.add_image(tag, pixels[..., :3], global_step=step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int) -> None:
        """Text shown verbatim (wrapped in a Markdown code block: YAML keeps its indentation)."""
        self.writer.add_text(tag, "```\n" + text + "\n```", global_step=step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()
