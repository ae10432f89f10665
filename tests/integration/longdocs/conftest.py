"""The long-document fixtures (tests/kits/longdocs_fixtures.py) for this folder."""

from kits.longdocs_fixtures import chunked_onnx, model, tokenizer  # noqa: F401
