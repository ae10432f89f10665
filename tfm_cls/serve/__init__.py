"""`tfm-cls serve`: a torch-free HTTP service for one exported .onnx file (docs/serving.md).

    settings.py   ServeSettings: every knob of the service, checked in one place
    errors.py     ApiError: an HTTP status, TEI's error_type and a message (never a traceback)
    inputs.py     a /predict body -> texts (and pairs) and options, or the ApiError saying why not
    batcher.py    the micro-batching queue and its single inference thread (Classifier.score)
    metrics.py    Prometheus metrics under TEI's names (multiprocess mode for --workers)
    app.py        the Starlette routes: /predict, /classify, /health, /info, /metrics and the page
    page.py       the page at GET /: one self-contained HTML string
    cli.py        the command line, uvicorn, workers and the SIGTERM drain

It imports the runtime (onnxruntime, tokenizers, numpy) and the serve extra (starlette, uvicorn,
prometheus-client), never torch.
"""
