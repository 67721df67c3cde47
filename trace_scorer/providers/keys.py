"""The providers as configured: their API keys (from the environment) and their names, each used once.

Shared by the judge (chat models) and the embeddings (embedding models) when they are built.
"""

from __future__ import annotations

from collections.abc import Mapping

from trace_scorer.config.common import ConfigError
from trace_scorer.config.settings import Settings

#: Sent as the key to endpoints that need none (vLLM, Ollama): the openai client insists on one.
_NO_KEY = "no-key"


def provider_api_key(index: int, name: str, variable: str | None, environ: Mapping[str, str]) -> str:
    """The API key of ``providers[index]`` from the variable it names (ConfigError when unset)."""
    if variable is None:
        return _NO_KEY
    value = environ.get(variable, "").strip()
    if not value:
        raise ConfigError(
            f"providers[{index}].api_key_env: environment variable {variable} (API key of provider {name!r}) is not set"
        )
    return value


def check_provider_names(settings: Settings) -> None:
    """Provider names are how models are named (``provider/model-id``): each may be used once."""
    names: set[str] = set()
    for index, provider in enumerate(settings.providers):
        if provider.name in names:
            raise ConfigError(f"providers[{index}].name: provider name {provider.name!r} is used twice")
        names.add(provider.name)
