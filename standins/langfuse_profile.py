"""What a given Langfuse server version does, as flags: :class:`ServerProfile`.

The stand-in (:mod:`standins.langfuse_server`) serves one version; its flags come from
:func:`profile_for` and each can be overridden (``LangfuseOptions(version="4.16.0", overrides={...})``).
The versions and what sets them apart (docs/langfuse.md has what the worker does about each):

==========  ====================================================================================
2.95.12     Legacy only, PostgreSQL. ``POST /scores`` one object → 200 ``{id}``; score ``metadata`` and
            ``timestamp`` dropped; ``datasetRunId`` scores rejected (``traceId`` required); score-config
            ranges exclusive; ``/projects`` without ``organization``/``metadata``; dataset items without
            ``mediaReferences``; ``GET /dataset-run-items`` → 405 (items come with
            ``GET /datasets/{name}/runs/{runName}``); ``/traces`` ignores ``environment`` and metadata
            filters; no OTLP route and no ``/v3/scores`` (HTML 404); v4 routes HTML 404.
3.110.0     Legacy. As 3.120, but ``GET /traces`` ignores ``filter`` (added in 3.116.1).
3.120.0     Legacy. ``POST /scores`` one object; v4 routes answer Next.js's HTML 404.
3.150.0     As 3.120, but ``/v2/observations`` answers 501 ``NotImplementedError`` (3.143–3.158).
4.16.0      v4, write mode ``events_only``: rows visible once their span ended (OTel export), metadata
            flattened to dotted keys, experiment-item I/O as raw strings, ``POST /scores`` one object;
            legacy reads 404 before auth (``dual``: served as on v3).
4.60.0      As 4.16, but ``POST /scores`` takes a list and answers 202/207 (SDK 5.0.4's contract).
==========  ====================================================================================

Every version: score configs listed newest first, names not unique, BOOLEAN categories ``True=1,
False=0``, ``POST /ingestion`` score-create (4.5 MB, the score's timestamp = the envelope's), unknown
routes answer an HTML 404, dataset runs keep ``updatedAt = createdAt``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from standins.settings import refuse_unknown

VERSIONS = ("2.95.12", "3.110.0", "3.120.0", "3.150.0", "4.16.0", "4.60.0")
DEFAULT_VERSION = {"v4": "4.16.0", "v3": "3.120.0"}
WRITE_MODES = ("events_only", "dual")


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.lstrip("v").split("."):
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def generation_of(version: str) -> str:
    """2.x and 3.x serve the legacy routes ("v3"); 4.x the v4 routes."""
    return "v4" if version_tuple(version)[0] >= 4 else "v3"


@dataclass(frozen=True)
class ServerProfile:
    """The behaviours of one server version (each overridable)."""

    version: str
    generation: str
    #: ``POST /scores`` body: "single" (one object → 200 ``{id}``, a list → 400 zod) or "list" (202/207).
    scores_body: str
    #: v4: a row is visible only once its span ended (+ ``export_delay``); no "started" rows.
    span_end_visibility: bool
    #: v4: observation metadata flattened to dotted keys (leaves JSON-parsed), experiment metadata
    #: flattened with string leaves.
    flatten_metadata: bool
    #: v4: ``/experiment-items`` ``input``/``output``/``expectedOutput`` as raw strings (``""`` when none).
    experiment_io_raw: bool
    #: How the v4 routes answer: "serve", "html404", or "501" (``/v2/observations`` only, 3.143–3.158).
    v4_routes: str
    #: Legacy read routes (``/traces``, dataset runs, run items): "serve" or "events_only_404".
    legacy_reads: str
    #: ``GET /traces`` applies ``filter`` (from 3.116.1).
    traces_filter: bool
    #: ``GET /traces`` applies ``environment`` and metadata conditions (not on 2.x).
    traces_env_metadata: bool
    #: ``/projects`` carries ``organization`` and ``metadata`` (not on 2.x).
    project_organization: bool
    #: Dataset items carry ``mediaReferences`` (not on 2.x).
    dataset_item_media: bool
    #: ``GET /dataset-run-items`` exists (2.x: 405).
    run_items_route: bool
    #: Scores may target ``datasetRunId`` (2.x: no, "traceId Required").
    dataset_run_scores: bool
    #: Score ``metadata`` and ``timestamp`` kept (2.x drops both silently).
    score_details: bool
    #: Score-config ranges exclusive (2.x: value == min or == max rejected).
    exclusive_ranges: bool
    #: ``POST /otel/v1/traces`` exists (not on 2.x).
    otlp: bool
    #: ``GET /v3/scores`` exists (not on 2.x).
    v3_scores: bool
    #: ``GET /unstable/evaluators`` and ``/unstable/evaluation-rules`` exist (4.x; 2.x and 3.x: HTML 404).
    evaluators_api: bool = False
    #: Config checks run later and invalid scores are dropped silently (finding 10). Off by default.
    async_validation: bool = False

    def replace(self, **changes: Any) -> ServerProfile:
        refuse_unknown(self, changes, "profile flags")
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def profile_for(version: str, write_mode: str = "events_only") -> ServerProfile:
    """The profile of ``version`` (any x.y.z; the named versions are the ones measured)."""
    if write_mode not in WRITE_MODES:
        raise ValueError(f"write_mode must be one of {WRITE_MODES}")
    v = version_tuple(version)
    generation = generation_of(version)
    v2 = v[0] < 3
    v4 = generation == "v4"
    if v4:
        v4_routes = "serve"
    elif (3, 143) <= v[:2] < (3, 159):
        v4_routes = "501"
    else:
        v4_routes = "html404"
    return ServerProfile(
        version=version,
        generation=generation,
        scores_body="list" if v >= (4, 59) else "single",
        span_end_visibility=v4,
        flatten_metadata=v4,
        experiment_io_raw=v4,
        v4_routes=v4_routes,
        legacy_reads="events_only_404" if v4 and write_mode == "events_only" else "serve",
        traces_filter=v >= (3, 116, 1),
        traces_env_metadata=not v2,
        project_organization=not v2,
        dataset_item_media=not v2,
        run_items_route=not v2,
        dataset_run_scores=not v2,
        score_details=not v2,
        exclusive_ranges=v2,
        otlp=not v2,
        v3_scores=not v2,
        evaluators_api=v4,
    )


__all__ = [
    "DEFAULT_VERSION",
    "VERSIONS",
    "WRITE_MODES",
    "ServerProfile",
    "generation_of",
    "profile_for",
    "version_tuple",
]
