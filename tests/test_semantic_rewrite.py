"""The model's graph with its embedding tables kept int8 (retrieval/semantic/rewrite.py; the
package's guarantee 8): the same vectors, bit for bit, as the graph the file holds."""

from __future__ import annotations

import pytest
from test_semantic import ANSWERS, MORE, generated_notes, profile

from memory_server.retrieval import semantic
from memory_server.retrieval.semantic import model as models
from memory_server.retrieval.semantic import rewrite


def packaged() -> tuple[models.Path, str | None, bytes]:
    path, digest = semantic._model_file({})
    assert isinstance(path, models.Path)
    return path, digest, path.read_bytes()


def loaded(monkeypatch: pytest.MonkeyPatch, rewritten: object) -> models.Model:
    path, digest, _ = packaged()
    with monkeypatch.context() as patch:
        patch.setattr(models, "gather_int8", rewritten)
        model = models.load(path, digest)
    assert isinstance(model, models.Model), model
    return model


def test_the_rewritten_graph_gives_the_same_vectors_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    lean = loaded(monkeypatch, rewrite.gather_int8)
    plain = loaded(monkeypatch, lambda model: None)
    assert lean.tables_int8 and not plain.tables_int8
    # Batches of every length the texts make (short facts, long notes, one word cut at 256 tokens).
    texts = [*profile(), *ANSWERS, *MORE, *generated_notes(200), "word " * 400, "", "Ω ≈ ç"]
    assert np.array_equal(lean.encode(texts), plain.encode(texts))
    assert lean.digest == plain.digest  # vectors kept under the file's sha256 stay comparable


def test_only_a_table_that_is_only_gathered_from_is_rewritten() -> None:
    _, _, model = packaged()
    lean = rewrite.gather_int8(model)
    assert lean is not None and len(lean) < len(model)
    assert rewrite.gather_int8(lean) is None  # nothing left to rewrite: each table is picked as int8
    for not_a_model in (b"", b"this is not an ONNX model", model[:1000], b"\x3a\xff\xff\xff\xff\xff\xff"):
        assert rewrite.gather_int8(not_a_model) is None


def test_a_rewritten_graph_that_does_not_load_leaves_the_file_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    model = loaded(monkeypatch, lambda model: b"not a model")
    assert not model.tables_int8
    assert model.encode(["Has a border collie named Biscuit"]).shape == (1, semantic.DIMENSIONS)
