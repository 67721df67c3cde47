"""The Langfuse client the worker holds: construction, start-up checks, API-generation probe.

Start-up (:meth:`LangfuseClient.connect`): ``GET /health`` (server version), ``GET /projects`` (the
keys' project), then which API generation to use: v4 when the server has both
``/api/public/v2/observations`` and ``/api/public/experiments``, legacy (v3) when either answers 404.
After that, :attr:`reads` and :meth:`post_scores` speak the right generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from importlib import metadata
from types import TracebackType

import httpx
import structlog
from langfuse.api import AsyncLangfuseAPI

from trace_scorer.config.common import ConfigError
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse.clock import Clock, SystemClock
from trace_scorer.langfuse.dataset_items import DatasetItemCache
from trace_scorer.langfuse.endpoints import EXPERIMENTS, HEALTH, OBSERVATIONS_V2, PROJECTS
from trace_scorer.langfuse.errors import LangfuseError, LangfuseNotFoundError, LangfuseResponseError
from trace_scorer.langfuse.reads_v3 import V3Reader
from trace_scorer.langfuse.reads_v4 import V4Reader
from trace_scorer.langfuse.retry import RequestBudget, RetryPolicy
from trace_scorer.langfuse.score_configs import ScoreConfigs
from trace_scorer.langfuse.scores import ScorePoster
from trace_scorer.langfuse.stats import RequestStats
from trace_scorer.langfuse.transport import Transport
from trace_scorer.langfuse.types import (
    ApiGeneration,
    ConnectionInfo,
    DeliveryReport,
    LangfuseReads,
    ScoreConfig,
    ScoreConfigSpec,
    ScoreToPost,
)

log = structlog.get_logger(__name__)

SDK_NAME = "trace-scorer"


def _version() -> str:
    try:
        return metadata.version("trace-scorer")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class LangfuseClient:
    """Typed, async access to one Langfuse project. Use ``async with`` or call :meth:`aclose`."""

    def __init__(
        self,
        settings: LangfuseSettings,
        *,
        clock: Clock | None = None,
        http: httpx.AsyncClient | None = None,
        expand_metadata: Sequence[str] = (),
    ) -> None:
        if not settings.public_key or settings.secret_key is None:
            raise ConfigError(
                "Langfuse credentials missing: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
                "(or TRACE_SCORER_LANGFUSE__PUBLIC_KEY / TRACE_SCORER_LANGFUSE__SECRET_KEY)"
            )
        self.settings = settings
        self.base_url = settings.base_url.rstrip("/")
        self.clock: Clock = clock or SystemClock()
        self.stats = RequestStats()
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=settings.timeout, follow_redirects=True)
        secret = settings.secret_key.get_secret_value()
        version = _version()
        self.api = AsyncLangfuseAPI(
            base_url=self.base_url,
            username=settings.public_key,
            password=secret,
            x_langfuse_sdk_name=SDK_NAME,
            x_langfuse_sdk_version=version,
            x_langfuse_public_key=settings.public_key,
            timeout=settings.timeout,
            httpx_client=self._http,
        )
        self.policy = RetryPolicy(settings.retry, self.clock, self.stats)
        self.transport = Transport(
            base_url=self.base_url,
            http=self._http,
            auth=httpx.BasicAuth(settings.public_key, secret),
            headers={
                "X-Langfuse-Sdk-Name": SDK_NAME,
                "X-Langfuse-Sdk-Version": version,
                "X-Langfuse-Public-Key": settings.public_key,
            },
            policy=self.policy,
            budget=RequestBudget(settings.requests_per_minute, self.clock, self.stats),
            stats=self.stats,
            clock=self.clock,
        )
        self._items = DatasetItemCache(self.transport, self.api, self.clock)
        self._expand_metadata = tuple(expand_metadata)
        self.score_configs = ScoreConfigs(transport=self.transport, api=self.api, policy=self.policy)
        #: Known score configs by name; the score poster fills ``configId`` and checks ranges from it.
        self.configs: dict[str, ScoreConfig] = {}
        self._generation: ApiGeneration | None = None
        self._reads: LangfuseReads | None = None
        self._poster: ScorePoster | None = None
        self.info: ConnectionInfo | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> LangfuseClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    # --- start-up ----------------------------------------------------------------------------

    async def connect(self) -> ConnectionInfo:
        """Health, project and API generation; logged once. Raises on bad keys or an unreachable server."""
        health = await self.transport.call(
            HEALTH, lambda options: self.api.health.with_raw_response.health(request_options=options)
        )
        projects = await self.transport.call(
            PROJECTS, lambda options: self.api.projects.with_raw_response.get(request_options=options)
        )
        data = projects.body.get("data") or []
        if not data:
            raise LangfuseResponseError(endpoint=PROJECTS.label, detail="no project belongs to these keys")
        project = data[0]
        generation = await self.probe_generation()
        self.use_generation(generation)
        self.info = ConnectionInfo(
            base_url=self.base_url,
            server_version=str(health.body.get("version", "")),
            project_id=str(project["id"]),
            project_name=str(project.get("name", "")),
            generation=generation,
        )
        log.info(
            "langfuse.connected",
            base_url=self.base_url,
            server_version=self.info.server_version,
            project_id=self.info.project_id,
            api_generation=generation.value,
            generation_source="configured" if self.settings.api_generation != "auto" else "probed",
        )
        return self.info

    async def probe_generation(self) -> ApiGeneration:
        """The configured generation, or v4 if the server has its endpoints (a 404 means legacy)."""
        if self.settings.api_generation != "auto":
            return ApiGeneration(self.settings.api_generation)
        now = self.clock.now()
        since = now - timedelta(minutes=1)
        try:
            await self.transport.call(
                OBSERVATIONS_V2,
                lambda options: self.api.observations.with_raw_response.get_many(
                    fields="core", limit=1, from_start_time=since, to_start_time=now, request_options=options
                ),
            )
            await self.transport.call(
                EXPERIMENTS,
                lambda options: self.api.experiments.with_raw_response.list(
                    from_start_time=since, fields="core", limit=1, request_options=options
                ),
            )
        except LangfuseNotFoundError as error:
            log.info("langfuse.probe.legacy", reason=str(error))
            return ApiGeneration.V3
        return ApiGeneration.V4

    def use_generation(self, generation: ApiGeneration) -> None:
        """Speak ``generation`` from now on (``connect`` calls this; tests may too)."""
        self._generation = generation
        if generation is ApiGeneration.V4:
            self._reads = V4Reader(
                transport=self.transport,
                api=self.api,
                settings=self.settings,
                items=self._items,
                clock=self.clock,
                expand_metadata=self._expand_metadata,
            )
        else:
            self._reads = V3Reader(
                transport=self.transport, api=self.api, settings=self.settings, items=self._items
            )
        self._poster = ScorePoster(
            transport=self.transport, api=self.api, settings=self.settings, generation=generation
        )
        self._poster.configs = self.configs

    # --- use ---------------------------------------------------------------------------------

    @property
    def generation(self) -> ApiGeneration:
        if self._generation is None:
            raise LangfuseError("call connect() first: the API generation is not known yet")
        return self._generation

    @property
    def reads(self) -> LangfuseReads:
        """Trace, dataset and experiment reads in the server's generation."""
        if self._reads is None:
            raise LangfuseError("call connect() first: the API generation is not known yet")
        return self._reads

    async def ensure_score_configs(self, specs: Sequence[ScoreConfigSpec]) -> dict[str, ScoreConfig]:
        """name → score config (created when missing); later scores with these names use them."""
        configs = await self.score_configs.ensure(specs)
        self.configs.update(configs)
        return configs

    async def post_scores(self, scores: Sequence[ScoreToPost]) -> DeliveryReport:
        """Validate, batch and post; every score ends up in exactly one list of the report."""
        if self._poster is None:
            raise LangfuseError("call connect() first: the API generation is not known yet")
        return await self._poster.post(scores)
