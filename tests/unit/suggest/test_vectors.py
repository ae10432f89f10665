"""The model-free fallback vectors: unit length, the same text the same vector across calls, similar
texts closer than unrelated ones (the MiniLM path is tested end to end in tests/integration/suggest)."""

import numpy as np

from tfm_cls.suggest.vectors import HashedVectors, dense


def test_hashed_vectors_are_unit_stable_and_keep_similarity():
    h = HashedVectors()
    a = dense(h(["the cat sat on the mat", "a dog ran in the park", "the cat sat on a mat"]))
    b = dense(h(["the cat sat on the mat"]))
    assert a.shape == (3, 256) and np.allclose(np.linalg.norm(a, axis=1), 1, atol=1e-5)
    assert np.allclose(a[0], b[0], atol=1e-6)
    assert a[0] @ a[2] > a[0] @ a[1] + 0.2
    assert h.unknown_share(["x", " "]).tolist() == [0.0, 1.0]
