"""``[[providers]]`` and ``[judge]``: the OpenAI-compatible LLM endpoints the judged metrics use."""

from __future__ import annotations

from trace_scorer.config.common import StrictModel


class ProviderSettings(StrictModel):
    """One OpenAI-compatible endpoint with its models."""

    name: str
    base_url: str
    #: Name of the environment variable holding the API key (never the key itself).
    api_key_env: str | None = None
    chat_models: list[str] = []
    embedding_models: list[str] = []


class JudgeSettings(StrictModel):
    temperature: float = 0.0
    max_tokens: int = 1000
