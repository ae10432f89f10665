"""The server a user writes by hand around an exported .onnx file: FastAPI, one tokenizer call and
one `session.run` per request, in FastAPI's thread pool (a plain `def` endpoint). The peer row of
benchmarks/serving.py; benchmark-only (fastapi is in the bench extra, not in serve).

    TFM_CLS_PEER_MODEL=model.onnx uvicorn --factory benchmarks.peers.fastapi_peer:create_app --port 8090

(No `from __future__ import annotations` here: FastAPI reads the endpoint's body type from its
annotation, and a class made inside `create_app` must be an object there, not a name.)
"""

import json
import os
from typing import Any

from benchmarks.peers import missing


def available() -> str | None:
    """None when the peer server can start here, else the reason (one line)."""
    return missing("fastapi", "pydantic", "uvicorn")


def create_app() -> Any:
    """The FastAPI app over $TFM_CLS_PEER_MODEL with $TFM_CLS_PEER_THREADS onnxruntime threads."""
    reason = available()
    if reason:
        raise SystemExit(f"error: {reason}")
    import numpy as np
    import onnxruntime as ort
    from fastapi import FastAPI
    from pydantic import BaseModel
    from tokenizers import Tokenizer

    class Body(BaseModel):
        inputs: str
        truncate: bool = True

    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ.get("TFM_CLS_PEER_THREADS", "1"))
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(os.environ["TFM_CLS_PEER_MODEL"], sess_options=options,
                                   providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    tokenizer = Tokenizer.from_str(meta["tfm_cls.tokenizer"])
    tokenizer.no_padding()
    tokenizer.enable_truncation(int(meta["tfm_cls.max_length"]))
    labels = json.loads(meta["tfm_cls.labels"])
    app = FastAPI()

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.post("/predict")
    def predict(body: Body) -> list[dict]:
        ids = np.array([tokenizer.encode(body.inputs).ids], dtype=np.int64)  # [1, seq]
        probs = session.run(["probabilities"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
        order = np.argsort(-probs)
        return [{"label": labels[i], "score": float(probs[i])} for i in order]

    return app
