"""benchmarks/hand_loop.py: the hand-written loops and the runtime's Classifier give the same scores
(the benchmark's rates are only comparable if they compute the same thing), and the runtime's
256-token, padding-bounded plan gives the scores of the 1,024-token plan it replaced."""

from __future__ import annotations

import numpy as np
from kits.export_testkit import TEXTS

from benchmarks import hand_loop
from tfm_cls.runtime.session import Classifier


def test_every_engine_of_the_benchmark_gives_the_classifiers_scores(classifier_onnx):
    texts = [" ".join(TEXTS[i % len(TEXTS)] for i in range(k % 5 + 1)) for k in range(70)]  # mixed lengths
    engines = hand_loop.engines(classifier_onnx, texts, threads=1)
    assert len(engines) == 4
    results = {name: run() for name, run in engines.items()}
    reference = results.pop("Classifier (tfm-cls infer)")
    assert reference.shape == (len(texts), reference.shape[1])
    for name, scores in results.items():
        np.testing.assert_allclose(scores, reference, atol=1e-6, err_msg=name)
    one_by_one = Classifier(str(classifier_onnx), threads=1, batching="fixed", batch_size=1).classify(texts)[0]
    np.testing.assert_allclose(reference, one_by_one, atol=1e-6)  # and what each text gets alone
