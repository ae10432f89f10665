"""tfm_cls: text classification with a from-scratch Transformer, exported to ONNX."""

__version__ = "0.1.0"

__all__ = ["TextClassifier"]


def __getattr__(name: str):
    # Lazy: `import tfm_cls` (and `tfm-cls --help`) must not import torch or scikit-learn.
    if name == "TextClassifier":
        from tfm_cls.api import TextClassifier

        return TextClassifier
    raise AttributeError(f"module 'tfm_cls' has no attribute {name!r}")
