"""The torch-free runtime: everything an exported .onnx file needs to classify texts.

    metadata.py    ExportMetadata: every metadata key of an export, to_props / from_props
    heads.py       per task type: scores, decisions and output rows (the training heads extend them)
    text.py        LongText and TextEncoder: truncation strategies and windows of long texts
    batching.py    length-sorted token-budget batches, padding
    session.py     the onnxruntime session and Classifier (metadata checked against the graph)
    readers.py     txt / jsonl / csv / tsv records, the one line reader
    writers.py     JSONL / CSV rows, the atomic output file
    stream.py      a file or stdin classified in bounded memory, in input order (tfm-cls infer)
    ray_predictor.py  OnnxClassifier, the Ray Data predictor of `tfm-cls batch` (the ray extra)

It imports onnxruntime, tokenizers and numpy, never torch (tests/integration/export/test_export_infer.py runs it in a
process where torch cannot be imported); the training side imports its text layer from here.
"""

import os

# onnxruntime >= 1.29 collects telemetry on Linux and writes a device id and an event store under
# ~/.cache/Microsoft/DeveloperTools/.onnxruntime for every process; this switches it off entirely.
# It is read once, when onnxruntime starts, so it is set before onnxruntime is imported (a user's
# own ORT_DISABLE_TELEMETRY=0 wins). docs/export.md
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
