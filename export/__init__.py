"""ONNX export, verification and torch-free deployment of tfm_cls models (docs/export.md).

Kept free of imports: export/infer.py and export/quantize.py must run without torch.
"""
