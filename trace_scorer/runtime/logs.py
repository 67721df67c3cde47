"""structlog set-up: human-readable in a terminal, JSON lines otherwise; always to stderr.

Every event, ours and those of libraries that log through the standard ``logging`` module (httpx,
procrastinate, …), goes through one processor chain:

- ``timestamp`` (ISO 8601, UTC), ``level``, ``event``, then ``target`` and ``trace_id`` when bound
  (structlog's ``bound_contextvars``), then the event's own keys — in that order, so a JSON line reads left to right;
- **secrets are redacted** (:func:`redact_secrets`): values under secret-looking keys (``secret_key``,
  ``api_key``, ``authorization``, ``password``, ``token``, …) and anything that looks like a key or
  credential inside any string (``sk-lf-…``, ``sk-…``, ``Bearer …``, ``Basic …``, ``user:pass@`` in URLs),
  exception text included;
- **no full trace contents above DEBUG** (:func:`truncate_long_values`): at INFO and above a string value
  longer than :data:`MAX_VALUE_CHARS` is cut, so a trace's input or output that ends up in an event is
  never written whole. DEBUG keeps everything (still redacted).

The level comes from ``[log] level`` (environment: ``TRACE_SCORER_LOG__LEVEL``), the format from
``[log] format`` (``TRACE_SCORER_LOG__FORMAT``; the container image sets ``json``).

structlog is imported when logging is configured, not with this module: importing it loads rich's
tracebacks and pygments (~0.1 s of CPU), a tenth of a ``score`` run that logs nothing. ``score`` configures
logging on first use (:func:`logging_on_first_use`): our modules log through :func:`get_logger`, whose
first event configures it; a standard-logging record does through a stand-in handler.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretBytes, SecretStr
from rich.console import Console
from rich.file_proxy import FileProxy

if TYPE_CHECKING:
    import structlog

REDACTED = "[REDACTED]"

#: At INFO and above, string values longer than this are cut (trace inputs and outputs never go whole).
MAX_VALUE_CHARS = 1000

#: Keys whose values are secrets whatever they look like (compared lower-case, ``-`` read as ``_``).
_SECRET_KEY = re.compile(
    r"(?:^|_)(?:secret|secret_key|client_secret|password|passwd|api_key|apikey|authorization|"
    r"proxy_authorization|auth|token|access_token|refresh_token|id_token|session_token|bearer|cookie|"
    r"set_cookie|private_key|encryption_key|credential|credentials|salt)$"
)

#: Secret-looking text inside any string: provider keys, HTTP credentials, credentials in URLs.
_SECRET_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    # Langfuse secret keys (sk-lf-…) and the OpenAI-style keys most judge providers use
    # (OpenAI sk-…/sk-proj-…, OpenRouter sk-or-…, Anthropic sk-ant-…).
    (re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{6,}"), REDACTED),
    # Google API keys.
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),
    # HTTP credentials as they appear in a header or a repr of one.
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/\-]+=*", re.IGNORECASE), rf"\1 {REDACTED}"),
    # user:password@ in a URL.
    (re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@"), f"{REDACTED}@"),
)

#: Libraries whose INFO records are per request, per model load or per queued job (procrastinate: the
#: worker logs its own ``plan``/``batch`` events): shown at DEBUG only.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "sentence_transformers", "procrastinate")

#: Keys that come first in a rendered event, in this order.
_FIRST_KEYS = ("timestamp", "level", "logger", "event", "target", "trace_id")


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and bool(_SECRET_KEY.search(key.lower().replace("-", "_")))


def redact_text(text: str) -> str:
    """``text`` with every secret-looking substring replaced by ``[REDACTED]``."""
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def redact_value(value: Any) -> Any:
    """A copy of ``value`` with secrets redacted, recursing into mappings, lists and tuples."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, SecretStr | SecretBytes):
        return REDACTED
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if _is_secret_key(k) and v not in (None, "") else redact_value(v)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v) for v in value)
    if isinstance(value, BaseException):
        return redact_text(repr(value))
    return value


def redact_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: redact secrets in the event (keys and values, nested, exception text)."""
    for key, value in list(event_dict.items()):
        if _is_secret_key(key) and value not in (None, ""):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = redact_value(value)
    return event_dict


def _truncate(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        if len(value) > limit:
            return f"{value[:limit]}… ({len(value) - limit} more characters; full text at DEBUG)"
        return value
    if isinstance(value, Mapping):
        return {k: _truncate(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_truncate(v, limit) for v in value)
    return value


def truncate_long_values(_logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: above DEBUG, cut long strings (tracebacks excepted)."""
    level = str(event_dict.get("level", method)).lower()
    if level == "debug":
        return event_dict
    for key, value in list(event_dict.items()):
        if key not in ("exception", "stack"):
            event_dict[key] = _truncate(value, MAX_VALUE_CHARS)
    return event_dict


def order_keys(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: timestamp, level, event, target, trace_id first; the rest as logged."""
    ordered = {key: event_dict.pop(key) for key in _FIRST_KEYS if key in event_dict}
    ordered.update(event_dict)
    return ordered


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of writing (not at configuration time), so that a
    replaced stderr (pytest's capture, a daemon redirect) is followed and a closed one never written —
    or, inside :func:`logs_above`, to the console of a live display (a progress bar)."""

    def __init__(self) -> None:
        self.above: FileProxy | None = None

    def write(self, text: str) -> int:
        return (self.above or sys.stderr).write(text)

    def flush(self) -> None:
        (self.above or sys.stderr).flush()


_STDERR = _CurrentStderr()


@contextmanager
def logs_above(console: Console) -> Iterator[None]:
    """Inside the block, log lines go through ``console`` (printed above its live display, e.g. a
    progress bar) instead of through the bar; rich's own redirection of ``sys.stderr`` is skipped when
    something else already redirected it, which is why the renderer is told the console directly.
    Only for a terminal: elsewhere there is no live display, and a JSON line must not be wrapped."""
    if not console.is_terminal:
        yield
        return
    previous, _STDERR.above = _STDERR.above, FileProxy(console, sys.stderr)
    try:
        yield
    finally:
        _STDERR.above.flush()
        _STDERR.above = previous


#: Marks the handler this module installs, so a second configure_logging() replaces it.
_HANDLER_NAME = "trace-scorer"


def _shared_processors(*, console: bool) -> list[structlog.typing.Processor]:
    import structlog

    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        structlog.processors.StackInfoRenderer(),
        structlog.dev.set_exc_info if console else structlog.processors.format_exc_info,
        redact_secrets,
        truncate_long_values,
        order_keys,
    ]


LogFormat = Literal["auto", "console", "json"]

#: The configuration :func:`logging_on_first_use` holds back until something logs; None: none pending.
_pending: tuple[str, LogFormat] | None = None


def configure_logging(level: str = "INFO", fmt: LogFormat = "auto") -> None:
    """Configure structlog and the standard logging module once per process (calling again replaces it)."""
    global _pending
    _pending = None
    import structlog

    level = level.upper()
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer(default=str)
    )
    shared = _shared_processors(console=use_console)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=_STDERR),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # Libraries' standard-logging records: same processors, same renderer, same stream.
    handler = logging.StreamHandler(_STDERR)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    _install(handler, level)


def _install(handler: logging.Handler, level: str) -> None:
    """``handler`` in place of the one installed before (if any), the levels set."""
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for existing in list(root.handlers):
        if existing.get_name() == _HANDLER_NAME:
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # httpx (and httpx2, under the openai client) logs every request line at INFO: operator noise (the
    # worker's tick event counts requests), and a formatted record per LLM call; sentence-transformers
    # (local embeddings) its device and model path.
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)


def _configure_pending() -> None:
    if _pending is not None:
        configure_logging(*_pending)


class _OnFirstRecord(logging.Handler):
    """Stands in for the handler :func:`configure_logging` installs: the first record configures logging,
    then goes to the real handler."""

    def emit(self, record: logging.LogRecord) -> None:
        _configure_pending()
        for handler in logging.getLogger().handlers:
            if handler.get_name() == _HANDLER_NAME and handler is not self:
                handler.handle(record)


@contextmanager
def logging_on_first_use(level: str = "INFO", fmt: LogFormat = "auto") -> Iterator[None]:
    """:func:`configure_logging`, done only if something logs inside the block (or when structlog is
    already imported: another module may log through it directly). For a command that usually logs
    nothing; outside the block nothing is held back."""
    global _pending
    if "structlog" in sys.modules:
        configure_logging(level, fmt)
        yield
        return
    _pending = (level, fmt)
    _install(_OnFirstRecord(), level.upper())
    try:
        yield
    finally:
        if _pending is not None:  # nothing logged: the stand-in goes, the configuration is not applied
            _pending = None
            root = logging.getLogger()
            for handler in list(root.handlers):
                if isinstance(handler, _OnFirstRecord):
                    root.removeHandler(handler)


def settle_logging() -> None:
    """Configure pending logging now if structlog has been imported since (a module that logs through it
    directly, e.g. the judge's): its events must not go out unconfigured."""
    if _pending is not None and "structlog" in sys.modules:
        _configure_pending()


class _Logger:
    """A structlog logger for ``name`` that imports structlog (and configures pending logging) on its
    first event, not when the module that logs is imported."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is None:
            _configure_pending()
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, method)


def get_logger(name: str) -> Any:
    """``structlog.get_logger(name)``, structlog imported on the first event (see the module's docstring)."""
    return _Logger(name)
