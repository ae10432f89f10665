"""ONNX export, verification and torch-free deployment of tfm_cls models (docs/export.md).

Kept free of imports: export/infer.py and export/quantize.py must run without torch.
"""

import os

# Before any onnxruntime import through this package: no onnxruntime telemetry (device id and
# event store under ~/.cache/Microsoft/DeveloperTools/.onnxruntime); export/infer.py does the same.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
