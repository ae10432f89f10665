"""The error types of tfm_cls: one module, imported by every other, importing none of them.

Every error a user can fix (a bad config, file, run directory or checkpoint) derives from
`TfmClsError`; the command line prints its message as one line on stderr and exits 2. Anything
else is an internal failure (exit 1). Each type also keeps its historical built-in base, so
`except ValueError` around a config load goes on working.
"""

from __future__ import annotations


class TfmClsError(Exception):
    """Bad input: the message says what was wrong (which file, key, line) and what to do."""


class ConfigError(TfmClsError, ValueError):
    """A configuration file or override is invalid; the message says where and why."""


class DataError(TfmClsError, ValueError):
    """The data cannot be used as configured; the message names the file, column or split."""


class InputError(TfmClsError, ValueError):
    """An input file cannot be read as texts; the message names the file and what was expected."""


class CorpusError(TfmClsError, ValueError):
    """Pretraining text cannot be read, or holds evaluation texts where that is an error."""


class RunDirError(TfmClsError, ValueError):
    """A run directory is missing a file, or holds something other than expected."""


class StaleExportError(RunDirError):
    """An ONNX export was made from other weights than its run's model.safetensors (retrained since)."""


class CheckpointError(TfmClsError, RuntimeError):
    """A checkpoint or weights file is missing, corrupt, truncated or does not fit the model."""


class InitFromError(TfmClsError, ValueError):
    """`model.init_from` names something that cannot be loaded."""


class HFImportError(TfmClsError, ValueError):
    """A Hugging Face checkpoint cannot be imported (unsupported architecture, missing files)."""


class WeightMismatchError(TfmClsError, ValueError):
    """A checkpoint's tensors do not match the architecture its config describes."""


class ExportError(TfmClsError, RuntimeError):
    """A run cannot be exported to ONNX."""


class QuantizeError(TfmClsError, ValueError):
    """int8 quantization cannot run on this input."""


class DiskFullError(TfmClsError, OSError):
    """A file could not be written because its device is full; the message says which file."""


class TrainingDivergedError(TfmClsError, RuntimeError):
    """The training loss became NaN or infinite; the last good checkpoint and weights are kept."""


class TeacherError(TfmClsError, ValueError):
    """A distillation teacher is missing, unreadable, not a classifier of ours, or does not fit the data."""


class InferenceError(TfmClsError):
    """Bad model file or bad input to the torch-free runtime (tfm_cls.runtime); the message names
    the file, the line and what was expected."""
