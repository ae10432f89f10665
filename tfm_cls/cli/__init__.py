"""`tfm-cls`, one module per command (parsing only; the work is in the library).

    entry.py        the top-level parser, assembled from the command modules, and the error convention (main)
    arguments.py    shared argument pieces: config arguments, inference options, providers, the size check
    shared.py       what several commands do after parsing: CommandFailed, the run summary, ONNX verification
    train.py pretrain.py tune.py distill.py compress.py       the recipes
    eval.py report.py predict.py                              a trained run (PyTorch)
    export.py verify_onnx.py quantize.py                      ONNX
    infer.py batch.py serve.py                                the torch-free runtime: a file, Ray Data, HTTP
    suggest.py label.py                                       which texts to label next, the label page
    web.py                                                    the browser page of an export (torch-free)

Each command module has `add_parser(subparsers)` and `run(args) -> int`, and imports what is heavy
(torch, datasets, onnxruntime, starlette, ray) inside `run` only.
"""

from tfm_cls.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
