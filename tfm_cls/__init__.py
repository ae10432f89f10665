"""tfm_cls: text classification with a from-scratch Transformer, exported to ONNX."""

__version__ = "0.1.0"
