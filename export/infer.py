#!/usr/bin/env python
"""Classify texts with an exported tfm_cls model, using only onnxruntime, tokenizers and numpy.

The .onnx file is all it needs: the tokenizer, the label names, the maximum length and the run's
long-text policy (truncation strategy, chunking) travel in its metadata. Texts are read in buffers
(--buffer-texts), sorted by length inside each buffer into batches of at most --max-tokens padded
tokens (or --batching fixed: --batch-size texts), and written back in input order as they are
done, so memory stays bounded on inputs of any size. A text longer than the model's length is
truncated by the policy (--truncation head / tail / head+tail), or with --chunk classified as
overlapping windows (--stride) whose logits or probabilities are aggregated (--aggregate mean /
max); its row then says how many windows it had. docs/long-documents.md

    python export/infer.py --model runs/x/model.onnx --input texts.txt --output predictions.jsonl
    cat texts.txt | python export/infer.py --model model.onnx > predictions.jsonl

Input: .txt (one text per line: lines end at "\n" only, "\r\n" accepted), .jsonl (an object per
line, text in --text-field, optional "id"), .csv (a header row, text in --text-field, optional "id"
column), or stdin (txt unless --input-format says otherwise). Invalid UTF-8 is an error naming the
line and byte offset unless --invalid-utf8 replace. Output: JSONL (default) or CSV (--output x.csv
or --output-format csv), exactly one row per input line / csv row, in input order, with id, line,
label, score, the probability of every label, whether the text was truncated, and whether it was
empty (an empty or blank line gets label null and "empty": true, never a guess). Multi-label
models list every label over its threshold with its score; regression rows hold the value;
sentence-pair models read the second text from --pair-field (a JSONL key, a CSV/TSV column).

A thin script: the flags are those of `tfm-cls infer` (tfm_cls/cli/infer.py), the work is the
runtime's (tfm_cls/runtime/stream.py); bad input is one `error:` line and exit code 2.
"""


from __future__ import annotations

import argparse
import logging
import sys

from tfm_cls.cli import infer as command
from tfm_cls.errors import TfmClsError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=command.DESCRIPTION)
    command.add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    try:
        return command.run(args)
    except TfmClsError as err:
        print(f"error: {err}", file=sys.stderr)  # the convention of `tfm-cls`: one line, exit 2
        return 2


if __name__ == "__main__":
    sys.exit(main())
