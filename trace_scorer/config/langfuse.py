"""``[langfuse]``: where the Langfuse server is and how to talk to it. Keys come from the environment."""

from __future__ import annotations

from pydantic import SecretStr

from trace_scorer.config.common import Duration, StrictModel


class LangfuseSettings(StrictModel):
    base_url: str = "https://cloud.langfuse.com"
    #: Public key (pk-lf-…); also read from LANGFUSE_PUBLIC_KEY.
    public_key: str | None = None
    #: Secret key (sk-lf-…): from the environment only (LANGFUSE_SECRET_KEY or TRACE_SCORER_LANGFUSE__SECRET_KEY).
    secret_key: SecretStr | None = None
    timeout: Duration = 30.0
