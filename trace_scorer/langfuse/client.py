"""The Langfuse client the worker holds: construction, start-up checks, API-generation probe.

Start-up (:meth:`LangfuseClient.connect`): ``GET /health`` (server version), ``GET /projects`` (the
keys' project), then which API generation to use: v4 when the server has both
``/api/public/v2/observations`` and ``/api/public/experiments``, legacy (v3) when either answers 404.
After that, :attr:`reads` and :meth:`post_scores` speak the right generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from types import TracebackType

import httpx
import structlog
from langfuse.api.core.datetime_utils import serialize_datetime

import trace_scorer
from trace_scorer.config.common import ConfigError, public_url
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse.errors import (
    LangfuseAuthError,
    LangfuseError,
    LangfuseHTTPError,
    LangfuseResponseError,
)
from trace_scorer.langfuse.http.clock import Clock, SystemClock
from trace_scorer.langfuse.http.endpoints import EXPERIMENTS, HEALTH, OBSERVATIONS_V2, PROJECTS, TRACES_LIST
from trace_scorer.langfuse.http.retry import CHECK_CONNECT_TIMEOUT, CHECK_RETRY, LangfuseRetryPolicy, RequestBudget
from trace_scorer.langfuse.http.stats import RequestStats
from trace_scorer.langfuse.http.transport import Transport
from trace_scorer.langfuse.reads.dataset_items import DatasetItemCache
from trace_scorer.langfuse.reads.v3 import V3Reader
from trace_scorer.langfuse.reads.v4 import V4Reader
from trace_scorer.langfuse.server.capabilities import ScorePosting, ServerCapabilities
from trace_scorer.langfuse.types import (
    ApiGeneration,
    ConnectionInfo,
    DeliveryReport,
    LangfuseReads,
    ScoreConfig,
    ScoreConfigSpec,
    ScoreToPost,
)
from trace_scorer.langfuse.writes.ids import format_timestamp
from trace_scorer.langfuse.writes.score_configs import ScoreConfigs
from trace_scorer.langfuse.writes.scores import ScorePoster

log = structlog.get_logger(__name__)

SDK_NAME = "trace-scorer"
#: A route this server does not serve: 404 (JSON or Next.js's HTML page), 405, or 501 (v3.143–3.158).
_NOT_SERVED = frozenset({404, 405, 501})


class LangfuseClient:
    """Typed, async access to one Langfuse project. Use ``async with`` or call :meth:`aclose`."""

    def __init__(
        self,
        settings: LangfuseSettings,
        *,
        clock: Clock | None = None,
        http: httpx.AsyncClient | None = None,
        expand_metadata: Sequence[str] = (),
        connect_timeout: float | None = None,
    ) -> None:
        """``connect_timeout``: seconds a connection may take (default: ``settings.timeout``)."""
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
        timeout = httpx.Timeout(settings.timeout, connect=connect_timeout or settings.timeout)
        self._http = http or httpx.AsyncClient(timeout=timeout, follow_redirects=True)
        secret = settings.secret_key.get_secret_value()
        version = trace_scorer.__version__
        self.policy = LangfuseRetryPolicy(settings.retry, self.clock, self.stats)
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
            max_answer_bytes=settings.max_answer_bytes,
            deadline=settings.deadline,
        )
        self._items = DatasetItemCache(self.transport, self.clock)
        self._expand_metadata = tuple(expand_metadata)
        self.score_configs = ScoreConfigs(transport=self.transport, policy=self.policy)
        #: Known score configs by name; the score poster fills ``configId`` and checks ranges from it.
        self.configs: dict[str, ScoreConfig] = {}
        self._generation: ApiGeneration | None = None
        self._reads: LangfuseReads | None = None
        self._poster: ScorePoster | None = None
        self.info: ConnectionInfo | None = None
        #: What the server can do, from its version (known after :meth:`connect`).
        self.capabilities = ServerCapabilities(None)

    @classmethod
    def failing_fast(cls, settings: LangfuseSettings, *, clock: Clock | None = None) -> LangfuseClient:
        """A client for ``trace-scorer check``: a short connect timeout and one quick retry
        (:data:`CHECK_RETRY`), so a wrong address is reported in seconds; the worker keeps its back-off."""
        quick = settings.model_copy(update={"retry": CHECK_RETRY})
        return cls(quick, clock=clock, connect_timeout=CHECK_CONNECT_TIMEOUT)

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
        """Health, project, capabilities and API generation; logged once.

        Raises on bad keys or an unreachable server, and :class:`ConfigError` when a forced
        ``api_generation`` is one this server cannot serve. Answers are read as plain JSON for the fields
        used (older servers leave out fields the package's newest models require).
        """
        health = await self.transport.plain(HEALTH, HEALTH.path)
        projects = await self.transport.plain(PROJECTS, PROJECTS.path)
        data = projects.body.get("data") if isinstance(projects.body, dict) else None
        if not data or not isinstance(data[0], dict) or "id" not in data[0]:
            raise LangfuseResponseError(endpoint=PROJECTS.label, detail="no project belongs to these keys")
        project = data[0]
        version = str(health.body.get("version", "")) if isinstance(health.body, dict) else ""
        self.capabilities = ServerCapabilities.from_version(version)
        generation, source = await self.choose_generation()
        self.use_generation(generation)
        assert self._poster is not None
        self.info = ConnectionInfo(
            base_url=public_url(self.base_url),  # shown and logged: never the userinfo
            server_version=version,
            project_id=str(project["id"]),
            project_name=str(project.get("name", "")),
            generation=generation,
            score_posting=self._poster.posting,
            generation_source=source,
        )
        log.info(
            "langfuse.connected",
            base_url=public_url(self.base_url),
            server_version=version or "unknown",
            project_id=self.info.project_id,
            api_generation=generation.value,
            generation_source=source,
            score_posting=self.info.score_posting.value,
        )
        return self.info

    async def choose_generation(self) -> tuple[ApiGeneration, str]:
        """The generation to speak and why: ``configured`` (checked against the server), ``version``
        (2.x/3.x: legacy, no probe), or ``probed`` (v4 routes answer → v4; 404/501 → legacy)."""
        configured = self.settings.api_generation
        if configured == "v4":
            if not await self._serves_v4():
                raise ConfigError(
                    f"langfuse.api_generation: 'v4' is set, but Langfuse {self.capabilities.describe()} at "
                    f"{public_url(self.base_url)} does not serve the v4 reads (/api/public/v2/observations, "
                    "/api/public/experiments); set 'auto' or 'v3'"
                )
            return ApiGeneration.V4, "configured"
        if configured == "v3":
            reason = await self._legacy_refused()
            if reason is not None:
                raise ConfigError(
                    f"langfuse.api_generation: 'v3' is set, but Langfuse {self.capabilities.describe()} at "
                    f"{public_url(self.base_url)} does not serve the legacy reads ({reason}); set 'auto' or 'v4'"
                )
            return ApiGeneration.V3, "configured"
        if self.capabilities.legacy_only:
            return ApiGeneration.V3, "version"
        return (ApiGeneration.V4 if await self._serves_v4() else ApiGeneration.V3), "probed"

    async def _serves_v4(self) -> bool:
        """Both v4 reads answer. 404 (JSON or Next.js's HTML page) and 501 (3.143–3.158) mean no."""
        now = self.clock.now()
        since = serialize_datetime(now - timedelta(minutes=1))
        try:
            await self.transport.plain(
                OBSERVATIONS_V2,
                OBSERVATIONS_V2.path,
                params={"fields": "core", "limit": 1, "fromStartTime": since, "toStartTime": serialize_datetime(now)},
            )
            await self.transport.plain(
                EXPERIMENTS, EXPERIMENTS.path, params={"fields": "core", "limit": 1, "fromStartTime": since}
            )
        except LangfuseHTTPError as error:
            if isinstance(error, LangfuseAuthError) or error.status not in _NOT_SERVED:
                raise
            log.info("langfuse.probe.legacy", reason=str(error))
            return False
        return True

    async def _legacy_refused(self) -> str | None:
        """Why the legacy trace list is not served (v4 ``events_only`` answers 404), or None if it is."""
        now = self.clock.now()
        try:
            await self.transport.plain(
                TRACES_LIST,
                TRACES_LIST.path,
                params={
                    "limit": 1,
                    "page": 1,
                    "fromTimestamp": format_timestamp(now - timedelta(minutes=1)),
                    "toTimestamp": format_timestamp(now),
                },
            )
        except LangfuseHTTPError as error:
            if isinstance(error, LangfuseAuthError) or error.status not in _NOT_SERVED:
                raise
            return str(error)
        return None

    def use_generation(self, generation: ApiGeneration, capabilities: ServerCapabilities | None = None) -> None:
        """Speak ``generation`` (to a server with ``capabilities``) from now on (``connect`` calls this;
        tests may too)."""
        if capabilities is not None:
            self.capabilities = capabilities
        self._generation = generation
        if generation is ApiGeneration.V4:
            self._reads = V4Reader(
                transport=self.transport,
                settings=self.settings,
                items=self._items,
                clock=self.clock,
                expand_metadata=self._expand_metadata,
            )
        else:
            self._reads = V3Reader(
                transport=self.transport,
                settings=self.settings,
                items=self._items,
                capabilities=self.capabilities,
            )
        self._poster = ScorePoster(
            transport=self.transport,
            settings=self.settings,
            posting=self._score_posting(),
            server_version=self.capabilities.describe(),
        )
        self._poster.configs = self.configs
        self._poster.exclusive_ranges = self.capabilities.config_ranges_exclusive
        self.score_configs.capabilities = self.capabilities

    def _score_posting(self) -> ScorePosting:
        """``langfuse.score_posting`` if set, else what the server's version supports."""
        configured = self.settings.score_posting
        return self.capabilities.score_posting if configured == "auto" else ScorePosting(configured)

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
