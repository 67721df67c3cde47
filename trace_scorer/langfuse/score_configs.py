"""Score configs: one per score name, created when missing, so scores display with their range.

Creating a config is not idempotent (no client-chosen id), so a create that timed out or failed with
5xx is never blindly resent: the configs are listed again first, and the create repeated only if the
config still does not exist.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from langfuse.api import AsyncLangfuseAPI
from langfuse.api.commons.types.config_category import ConfigCategory as ApiConfigCategory
from langfuse.api.core.http_response import AsyncHttpResponse
from langfuse.api.core.request_options import RequestOptions

from trace_scorer.config.common import SCORE_NAME_PATTERN, ConfigError
from trace_scorer.langfuse.endpoints import SCORE_CONFIGS_CREATE, SCORE_CONFIGS_LIST
from trace_scorer.langfuse.errors import LangfuseError, LangfuseHTTPError, LangfuseTransportError
from trace_scorer.langfuse.retry import RetryPolicy
from trace_scorer.langfuse.transport import Transport
from trace_scorer.langfuse.types import ConfigCategory, ScoreConfig, ScoreConfigSpec

log = structlog.get_logger(__name__)

#: Page size when listing configs (the endpoint pages with page/limit).
LIST_LIMIT = 100


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


class ScoreConfigs:
    def __init__(self, *, transport: Transport, api: AsyncLangfuseAPI, policy: RetryPolicy) -> None:
        self._transport = transport
        self._api = api
        self._policy = policy

    async def list(self) -> list[ScoreConfig]:
        """Every score config of the project, archived ones included, in Langfuse's order."""
        configs: list[ScoreConfig] = []
        page = 1
        while True:
            answer = await self._transport.call(SCORE_CONFIGS_LIST, functools.partial(self._send_list, page))
            data = answer.body.get("data") or []
            configs += [score_config_from_json(c) for c in data]
            total_pages = (answer.body.get("meta") or {}).get("totalPages")
            if not data or not isinstance(total_pages, int) or page >= total_pages:
                return configs
            page += 1

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
                _check_compatible(spec, config)
            result[spec.name] = config
        return result

    async def _create(self, spec: ScoreConfigSpec) -> ScoreConfig:
        first = True

        async def look_then_create() -> ScoreConfig:
            nonlocal first
            if not first:
                try:
                    existing = await self.list()
                except (LangfuseHTTPError, LangfuseTransportError) as error:
                    # Already retried on its own: do not multiply the attempts by retrying the create too.
                    raise LangfuseError(
                        f"could not check whether score config {spec.name!r} exists: {error}"
                    ) from error
                found = _active_by_name(existing).get(spec.name)
                if found is not None:
                    return found
            first = False
            send = functools.partial(self._send_create, spec)
            answer = await self._transport.call(SCORE_CONFIGS_CREATE, send, retry=False)
            return score_config_from_json(answer.body)

        return await self._policy.run(SCORE_CONFIGS_CREATE.label, look_then_create)

    async def _send_list(self, page: int, options: RequestOptions) -> AsyncHttpResponse[Any]:
        response: AsyncHttpResponse[Any] = await self._api.score_configs.with_raw_response.get(
            page=page, limit=LIST_LIMIT, request_options=options
        )
        return response

    async def _send_create(self, spec: ScoreConfigSpec, options: RequestOptions) -> AsyncHttpResponse[Any]:
        kwargs: dict[str, Any] = {}
        if spec.data_type == "NUMERIC":
            if spec.min_value is not None:
                kwargs["min_value"] = spec.min_value
            if spec.max_value is not None:
                kwargs["max_value"] = spec.max_value
        if spec.data_type == "CATEGORICAL":
            kwargs["categories"] = [ApiConfigCategory(value=c.value, label=c.label) for c in spec.categories]
        if spec.description is not None:
            kwargs["description"] = spec.description
        response: AsyncHttpResponse[Any] = await self._api.score_configs.with_raw_response.create(
            name=spec.name, data_type=spec.data_type, request_options=options, **kwargs
        )
        return response


def _unique_specs(specs: Sequence[ScoreConfigSpec]) -> dict[str, ScoreConfigSpec]:
    wanted: dict[str, ScoreConfigSpec] = {}
    for spec in specs:
        if not SCORE_NAME_PATTERN.match(spec.name):
            raise ConfigError(
                f"score name {spec.name!r} is not valid in Langfuse: at most 35 characters of letters, "
                "digits, '_ .()-'"
            )
        if spec.data_type == "CATEGORICAL" and not spec.categories:
            raise ConfigError(f"score {spec.name!r}: a CATEGORICAL score config needs categories")
        if spec.name in wanted and wanted[spec.name] != spec:
            raise ConfigError(f"score name {spec.name!r} is configured twice, differently")
        wanted[spec.name] = spec
    return wanted


def _active_by_name(configs: Sequence[ScoreConfig]) -> dict[str, ScoreConfig]:
    """The first active (not archived) config of each name."""
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
