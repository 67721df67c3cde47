"""Score configs: one per score name, created when missing, so scores display with their range.

Creating a config is not idempotent (no client-chosen id), so a create that timed out or failed with
5xx is never blindly resent: the configs are listed again first, and the create repeated only if the
config still does not exist.

Langfuse does not keep names unique and lists configs newest first. Of several active configs of one
name the *oldest* is used (``createdAt``, then id), whatever the list order; after creating one, the
configs are listed again and the oldest active one of that name used, so replicas that raced to create
it end up on the same config. Lists and creates are read as plain JSON (only the fields needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from trace_scorer.config.common import SCORE_NAME_PATTERN, ConfigError
from trace_scorer.data.times import parse_timestamp
from trace_scorer.langfuse.errors import (
    LangfuseError,
    LangfuseHTTPError,
    LangfuseResponseError,
    LangfuseTransportError,
)
from trace_scorer.langfuse.http.endpoints import SCORE_CONFIGS_CREATE, SCORE_CONFIGS_LIST
from trace_scorer.langfuse.http.retry import LangfuseRetryPolicy
from trace_scorer.langfuse.http.transport import Transport
from trace_scorer.langfuse.server.capabilities import ServerCapabilities
from trace_scorer.langfuse.types import ConfigCategory, ScoreConfig, ScoreConfigSpec

log = structlog.get_logger(__name__)

#: Page size when listing configs (the endpoint pages with page/limit).
LIST_LIMIT = 100
#: A server of unknown version (the default until the client knows better).
UNKNOWN_SERVER = ServerCapabilities(None)
#: Sorts a config without a readable ``createdAt`` after every dated one.
_UNDATED = datetime.max.replace(tzinfo=UTC)


def score_config_from_json(body: Mapping[str, Any]) -> ScoreConfig:
    categories = tuple(
        ConfigCategory(value=float(c["value"]), label=str(c["label"])) for c in body.get("categories") or ()
    )
    return ScoreConfig(
        id=str(body["id"]),
        name=str(body["name"]),
        data_type=str(body["dataType"]),
        min_value=body.get("minValue"),
        max_value=body.get("maxValue"),
        categories=categories,
        is_archived=bool(body.get("isArchived", False)),
        description=body.get("description"),
    )


def _created(body: Mapping[str, Any]) -> datetime:
    try:
        return parse_timestamp(str(body["createdAt"]))
    except (KeyError, ValueError):
        return _UNDATED


class ScoreConfigs:
    def __init__(
        self,
        *,
        transport: Transport,
        policy: LangfuseRetryPolicy,
        capabilities: ServerCapabilities = UNKNOWN_SERVER,
    ) -> None:
        self._transport = transport
        self._policy = policy
        #: What the server can do (2.x: ranges are exclusive, so configs are created without one).
        self.capabilities = capabilities

    async def list(self) -> list[ScoreConfig]:
        """Every score config of the project, archived ones included, oldest first (``createdAt``, id)."""
        bodies: list[Mapping[str, Any]] = []
        page = 1
        while True:
            answer = await self._transport.plain(
                SCORE_CONFIGS_LIST, SCORE_CONFIGS_LIST.path, params={"page": page, "limit": LIST_LIMIT}
            )
            body = answer.body
            if not isinstance(body, Mapping) or not isinstance(body.get("data") or [], list):
                raise LangfuseResponseError(endpoint=SCORE_CONFIGS_LIST.label, detail="no data list in the answer")
            data = [c for c in body.get("data") or [] if isinstance(c, Mapping) and c.get("id") and c.get("name")]
            bodies += data
            total_pages = (body.get("meta") or {}).get("totalPages")
            if not body.get("data") or not isinstance(total_pages, int) or page >= total_pages:
                break
            page += 1
        unique = {str(b["id"]): b for b in bodies}.values()  # offset paging may repeat one
        return [score_config_from_json(b) for b in sorted(unique, key=lambda b: (_created(b), str(b["id"])))]

    async def ensure(self, specs: Sequence[ScoreConfigSpec]) -> dict[str, ScoreConfig]:
        """name → config for every spec: the existing active config, or a newly created one.

        Raises :class:`ConfigError` when a name is invalid, wanted twice differently, or exists in
        Langfuse with another data type (posting would be rejected). A different range is logged and
        the existing config kept: scores are then checked against its range before sending.
        """
        wanted = _unique_specs(specs)
        if not wanted:
            return {}
        existing = _active_by_name(await self.list())
        result: dict[str, ScoreConfig] = {}
        for spec in wanted.values():
            config = existing.get(spec.name)
            if config is None:
                config = await self._create(spec)
                log.info(
                    "langfuse.score_config.created",
                    name=spec.name,
                    config_id=config.id,
                    data_type=config.data_type,
                )
            else:
                self._check_compatible(spec, config)
            result[spec.name] = config
        return result

    async def _create(self, spec: ScoreConfigSpec) -> ScoreConfig:
        first = True

        async def listed() -> ScoreConfig | None:
            try:
                existing = await self.list()
            except (LangfuseHTTPError, LangfuseTransportError) as error:
                # Already retried on its own: do not multiply the attempts by retrying the create too.
                raise LangfuseError(f"could not check whether score config {spec.name!r} exists: {error}") from error
            return _active_by_name(existing).get(spec.name)

        async def look_then_create() -> ScoreConfig:
            nonlocal first
            if not first:
                found = await listed()
                if found is not None:
                    return found
            first = False
            answer = await self._transport.plain(
                SCORE_CONFIGS_CREATE, SCORE_CONFIGS_CREATE.path, body=self.create_body(spec), retry=False
            )
            created = score_config_from_json(answer.body) if _readable(answer.body) else None
            # Another replica may have created one too: everybody uses the oldest active one.
            chosen = await listed()
            if chosen is not None:
                return chosen
            if created is None:
                raise LangfuseResponseError(
                    endpoint=SCORE_CONFIGS_CREATE.label, detail=f"score config {spec.name!r} created but not listed"
                )
            return created

        return await self._policy.run(SCORE_CONFIGS_CREATE.label, look_then_create)

    def create_body(self, spec: ScoreConfigSpec) -> dict[str, Any]:
        """The create request's JSON. On servers with exclusive ranges (2.x) NUMERIC configs get no
        range: a 0..1 config there would reject exactly 0 and 1, the commonest scores."""
        body: dict[str, Any] = {"name": spec.name, "dataType": spec.data_type}
        if spec.data_type == "NUMERIC" and not self.capabilities.config_ranges_exclusive:
            if spec.min_value is not None:
                body["minValue"] = spec.min_value
            if spec.max_value is not None:
                body["maxValue"] = spec.max_value
        if spec.data_type == "CATEGORICAL":
            body["categories"] = [{"value": c.value, "label": c.label} for c in spec.categories]
        if spec.description is not None:
            body["description"] = spec.description
        return body

    def _check_compatible(self, spec: ScoreConfigSpec, config: ScoreConfig) -> None:
        if (
            self.capabilities.config_ranges_exclusive
            and spec.data_type == "NUMERIC"
            and config.data_type == "NUMERIC"
            and (config.min_value, config.max_value) == (None, None)
        ):
            return  # created without a range on purpose (see create_body)
        _check_compatible(spec, config)


def _readable(body: Any) -> bool:
    return isinstance(body, Mapping) and bool(body.get("id")) and bool(body.get("name")) and "dataType" in body


def _unique_specs(specs: Sequence[ScoreConfigSpec]) -> dict[str, ScoreConfigSpec]:
    wanted: dict[str, ScoreConfigSpec] = {}
    for spec in specs:
        if not SCORE_NAME_PATTERN.match(spec.name):
            raise ConfigError(
                f"score name {spec.name!r} is not valid in Langfuse: at most 35 characters of letters, digits, '_ .()-'"
            )
        if spec.data_type == "CATEGORICAL" and not spec.categories:
            raise ConfigError(f"score {spec.name!r}: a CATEGORICAL score config needs categories")
        if spec.name in wanted and wanted[spec.name] != spec:
            raise ConfigError(f"score name {spec.name!r} is configured twice, differently")
        wanted[spec.name] = spec
    return wanted


def _active_by_name(configs: Sequence[ScoreConfig]) -> dict[str, ScoreConfig]:
    """The first active (not archived) config of each name: the oldest, as :meth:`ScoreConfigs.list` sorts."""
    active: dict[str, ScoreConfig] = {}
    for config in configs:
        if not config.is_archived:
            active.setdefault(config.name, config)
    return active


def _check_compatible(spec: ScoreConfigSpec, config: ScoreConfig) -> None:
    if config.data_type != spec.data_type:
        raise ConfigError(
            f"score config {config.name!r} ({config.id}) exists in Langfuse as {config.data_type}, but "
            f"trace-scorer posts {spec.data_type} scores under that name: "
            "rename the score or archive the config"
        )
    if spec.data_type == "NUMERIC" and (config.min_value, config.max_value) != (
        spec.min_value,
        spec.max_value,
    ):
        log.warning(
            "langfuse.score_config.range_differs",
            name=config.name,
            config_id=config.id,
            langfuse_range=[config.min_value, config.max_value],
            wanted_range=[spec.min_value, spec.max_value],
        )
