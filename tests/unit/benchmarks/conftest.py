"""The export fixtures (tests/kits/export_fixtures.py) for this folder."""

from kits.export_fixtures import classifier, classifier_onnx, tokenizer  # noqa: F401
