"""`tfm-cls serve`: a torch-free HTTP service for one exported .onnx file (docs/serving.md).

    settings.py    ServeSettings: every knob of the service, checked in one place
    api_error.py   ApiError: an HTTP status, TEI's error_type and a message (never a traceback)
    requests.py    a /predict body (TEI's shapes or the Inference API's task schema) -> texts and options
    service.py     one worker's model, life cycle, admission, tokenization and answers
    batcher.py     the micro-batching queue and its single inference thread (Classifier.score)
    admission.py   the ASGI layer that refuses (429) before the body is read while the service is full
    prometheus.py  Prometheus metrics under TEI's names (multiprocess mode for --workers)
    app.py         the Starlette routes: /predict (and / and /invocations), /classify, /health (/ping),
                   /info, /metrics, /openapi.json and the page
    openapi.py     the OpenAPI document of those routes
    home_page.py   the page at GET /: one self-contained HTML string
    server.py      the start-up: settings, the port, uvicorn, workers and the SIGTERM drain
                   (flags: tfm_cls/cli/serve.py)

It imports the runtime (onnxruntime, tokenizers, numpy) and the serve extra (starlette, uvicorn,
prometheus-client), never torch (nor pyyaml).
"""
