"""Langfuse observation rows → :class:`~trace_scorer.sample.Sample` (docs/formats.md).

- :func:`extract_sample`: one trace's rows (+ its experiment/dataset item) → a Sample; never raises on
  data, writes what it could not read into ``Sample.notes``.
- :func:`extract_session`: the rows of a session's traces → one Sample (the whole conversation).
- :func:`samples_from_rows`: offline, rows of many traces → one Sample per trace.
- :func:`looks_like_observation_row` / :func:`looks_like_experiment_item`: what a file record is.
- :func:`index_items`: experiment items keyed by ``traceId`` for :func:`samples_from_rows`.
"""

from trace_scorer.config.references import ReferenceSettings
from trace_scorer.extract.extractor import extract_sample, extract_session
from trace_scorer.extract.model import RAW_ARGUMENTS_KEY
from trace_scorer.extract.offline import (
    index_items,
    looks_like_experiment_item,
    looks_like_observation_row,
    samples_from_rows,
)

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "ReferenceSettings",
    "extract_sample",
    "extract_session",
    "index_items",
    "looks_like_experiment_item",
    "looks_like_observation_row",
    "samples_from_rows",
]
