"""The errors the Langfuse adapter raises: typed, with the server's own message, never a secret."""

from __future__ import annotations

from trace_scorer.config.common import public_url
from trace_scorer.errors import UserError


class LangfuseError(Exception):
    """Base of every error the adapter raises."""


class LangfuseHTTPError(LangfuseError):
    """Langfuse answered with an error status; ``message`` is the response's own message."""

    def __init__(
        self,
        *,
        endpoint: str,
        status: int,
        message: str,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.attempts = attempts
        super().__init__(self._text())

    def _text(self) -> str:
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{self.endpoint}: HTTP {self.status}{tries}: {self.message}"

    def __str__(self) -> str:
        return self._text()


class LangfuseAuthError(LangfuseHTTPError, UserError):
    """401/403: the keys are wrong, for another project, or for another server or region."""

    def __init__(self, *, endpoint: str, status: int, message: str, base_url: str) -> None:
        self.base_url = base_url
        super().__init__(endpoint=endpoint, status=status, message=message)

    def _text(self) -> str:
        what = "rejected the credentials" if self.status == 401 else "denied access"
        return (
            f"Langfuse at {public_url(self.base_url)} {what} (HTTP {self.status} on {self.endpoint}: {self.message}). "
            "Check LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY: both must belong to the same project "
            "on this server and region (see langfuse.base_url)."
        )


class LangfuseNotFoundError(LangfuseHTTPError):
    """404: the endpoint (another API generation) or the object does not exist."""


class LangfuseTransportError(LangfuseError):
    """No HTTP answer: a timeout or a dropped/refused connection (after the retries)."""

    def __init__(self, *, endpoint: str, kind: str, detail: str, attempts: int = 1) -> None:
        self.endpoint = endpoint
        self.kind = kind
        self.detail = detail
        self.attempts = attempts
        super().__init__(self._text())

    def _text(self) -> str:
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{self.endpoint}: {self.kind}{tries}: {self.detail}"

    def __str__(self) -> str:
        return self._text()


class LangfuseResponseError(LangfuseError):
    """A 2xx answer whose body is not what the API promises (not retried: it would not change)."""

    def __init__(self, *, endpoint: str, detail: str) -> None:
        self.endpoint = endpoint
        super().__init__(f"{endpoint}: unexpected response: {detail}")


class LangfuseAnswerTooLarge(LangfuseError):
    """An answer longer than ``[langfuse] max_answer_bytes``: reading stopped there (not retried: the same
    request would get the same answer). The reader asks again for fewer rows, or skips the one trace."""

    def __init__(self, *, endpoint: str, limit: int) -> None:
        self.endpoint = endpoint
        self.limit = limit
        super().__init__(f"{endpoint}: the answer is longer than {limit} bytes (langfuse.max_answer_bytes)")


class LangfuseContractError(LangfuseError, UserError):
    """The server refused a request as a whole for its shape (a route or body this version does not take).

    Not a rejected score and not an outage: nothing is settled, and retrying the same request cannot
    help. The target stops with this message until the adapter or the configuration matches the server.
    """

    def __init__(self, *, endpoint: str, server_version: str, detail: str) -> None:
        self.endpoint = endpoint
        self.server_version = server_version
        self.detail = detail
        super().__init__(
            f"{endpoint}: Langfuse {server_version} refused the request as a whole ({detail}); "
            "nothing was recorded as scored"
        )


class LangfuseUnusableError(UserError):
    """``check`` could not use Langfuse at all: one line naming the URL, what happened and the likely fix."""

    @classmethod
    def explain(cls, error: LangfuseError, base_url: str) -> LangfuseUnusableError:
        url = public_url(base_url)
        if isinstance(error, LangfuseTransportError):
            return cls(
                f"Langfuse at {url} cannot be reached ({error}). Check langfuse.base_url or LANGFUSE_BASE_URL "
                "(e.g. https://cloud.langfuse.com, https://us.cloud.langfuse.com or your server's address) and "
                "that this machine can reach it (DNS, proxy, firewall)."
            )
        if isinstance(error, LangfuseHTTPError) and error.status in (404, 405):
            return cls(
                f"{url} is not the address of a Langfuse server ({error.endpoint}: HTTP {error.status}). Set "
                "langfuse.base_url or LANGFUSE_BASE_URL to the address the Langfuse UI is served at, without "
                "/api/public (e.g. https://cloud.langfuse.com)."
            )
        if isinstance(error, LangfuseHTTPError):
            return cls(
                f"Langfuse at {url} answers but fails ({error}). The server is in trouble: see its logs or "
                "status page, and run check again later."
            )
        return cls(
            f"{url} does not answer like Langfuse's API ({error}). Check langfuse.base_url or LANGFUSE_BASE_URL."
        )
