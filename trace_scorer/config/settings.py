"""The root settings and how they are loaded.

Precedence, highest first: ``TRACE_SCORER_…`` environment variables (``__`` for nesting), Langfuse's own
variables (``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY``, ``LANGFUSE_BASE_URL``/``LANGFUSE_HOST``),
the TOML file, the defaults. Secrets are refused in the TOML file: they belong in the environment.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from trace_scorer.config.common import BOOL_FOR_NUMBER, ConfigError, did_you_mean
from trace_scorer.config.embeddings import EmbeddingSettings
from trace_scorer.config.http import HttpSettings
from trace_scorer.config.judge import JudgeSettings, ProviderSettings
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.config.logging import LogSettings
from trace_scorer.config.state import StateSettings, refuse_password_in_file
from trace_scorer.config.targets import KpiEntry, TargetSettings, entry_model
from trace_scorer.config.worker import WorkerSettings
from trace_scorer.kpi.formulas import installed_formulas

DEFAULT_CONFIG_FILE = Path("settings.toml")

#: Keys that must never be written in the TOML file, with where they come from instead.
_SECRET_KEYS = {("langfuse", "secret_key"): "LANGFUSE_SECRET_KEY"}

#: Langfuse's own environment variables → our keys (lower precedence than TRACE_SCORER_…).
_LANGFUSE_ENV = {
    "LANGFUSE_PUBLIC_KEY": "public_key",
    "LANGFUSE_SECRET_KEY": "secret_key",
    "LANGFUSE_HOST": "base_url",
    "LANGFUSE_BASE_URL": "base_url",  # after HOST: the newer name wins when both are set
}


class Settings(BaseSettings):
    """Everything trace-scorer reads from ``settings.toml`` and the environment."""

    model_config = SettingsConfigDict(
        env_prefix="TRACE_SCORER_", env_nested_delimiter="__", extra="forbid", nested_model_default_partial_update=True
    )

    log: LogSettings = Field(default_factory=LogSettings)
    langfuse: LangfuseSettings = Field(default_factory=LangfuseSettings)
    providers: list[ProviderSettings] = Field(default_factory=list)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    targets: list[TargetSettings] = Field(default_factory=list)
    http: HttpSettings = Field(default_factory=HttpSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file's content arrives as init arguments; the environment overrides it.
        return (env_settings, init_settings)

    def target(self, name: str) -> TargetSettings:
        for target in self.targets:
            if target.name == name:
                return target
        known = ", ".join(t.name for t in self.targets) or "none"
        raise ConfigError(f"--target {name!r}: no such target (configured: {known})")


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses arrays and tables recursively
        raise ConfigError(f"{path}: not valid TOML: {_TOO_DEEP}") from None


#: What a file or variable nested deeper than Python's recursion limit is told (issue 22).
_TOO_DEEP = "arrays or tables nested too deeply (no setting nests more than a few levels)"


def _apply_langfuse_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    section = data.get("langfuse")
    if section is not None and not isinstance(section, dict):
        return  # let validation report the wrong type
    overrides = {key: environ[var] for var, key in _LANGFUSE_ENV.items() if environ.get(var)}
    if overrides:
        data["langfuse"] = {**(section or {}), **overrides}


#: Header names that carry credentials: refused in the TOML file (they belong in the environment).
_SECRET_HEADERS = re.compile(r"authorization|api[-_]?key|token|secret|cookie|password", re.IGNORECASE)


def _secret_headers(data: Mapping[str, Any], source: str) -> list[str]:
    """``[[providers]] headers`` from the file may not carry credentials (the header's value is not shown)."""
    providers = data.get("providers")
    if not isinstance(providers, list):
        return []
    problems = []
    for index, provider in enumerate(providers):
        headers = provider.get("headers") if isinstance(provider, dict) else None
        if not isinstance(headers, dict):
            continue
        for name in headers:
            if isinstance(name, str) and _SECRET_HEADERS.search(name):
                problems.append(
                    f"{source}: providers[{index}].headers.{name}: looks like a credential, and secrets are read "
                    "from the environment only: put the API key into the variable api_key_env names (sent as "
                    "'Authorization: Bearer …'), or give the providers in TRACE_SCORER_PROVIDERS"
                )
    return problems


def format_location(loc: tuple[int | str, ...]) -> str:
    """``("targets", 0, "kpis", 1, "threshold", "metric")`` → ``targets[0].kpis[1].metric``."""
    text = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif previous is not None and isinstance(previous, int) and part in installed_formulas():
            pass  # pydantic puts the union's tag in the path; the user never wrote it
        else:
            text += f".{part}" if text else str(part)
        previous = part
    return text




def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = []
    for error in exc.errors():
        where = format_location(tuple(error["loc"]))
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == BOOL_FOR_NUMBER and "ctx" in error:
            # Raised by the section's model validator: the key is in the context, not the location.
            key = str(error["ctx"]["key"])
            where = f"{where}.{key}" if where else key
            message = message.removeprefix(f"{key}: ")
        if error["type"] == "extra_forbidden":
            message = "unknown key" + did_you_mean(str(error["loc"][-1]), known_keys(tuple(error["loc"][:-1])))
        lines.append(f"{source}: {where}: {message}")
    return "\n".join(lines)


def known_keys(loc: tuple[int | str, ...], model: Any = None) -> list[str]:
    """The keys of the section at ``loc`` (a validation error's location less its last key), for "did you
    mean": the fields of the model found by following ``loc`` down from ``model`` (default: Settings)."""
    current: Any = Settings if model is None else model
    for part in loc:
        current = _section_type(current)
        if isinstance(part, int):
            continue  # an item of a list: _section_type took the list off
        if isinstance(current, type) and issubclass(current, KpiEntry) and part in installed_formulas():
            current = entry_model(installed_formulas()[part])  # the formula's tag pydantic puts into the location
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
            if field is None:
                return []
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        else:
            return []
    current = _section_type(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [field.alias or name for name, field in current.model_fields.items()]
    return []


def _section_type(annotation: Any) -> Any:
    """The model inside ``Annotated[…]``, ``list[…]`` and ``X | None`` (the annotation itself otherwise)."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated or origin is list:
            annotation = get_args(annotation)[0]
        elif origin in (Union, UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


#: Checks the ``[[targets]]`` entries of a refused file: (the entries as written, the source) → problems.
TargetsCheck = Callable[[Any, str], list[str]]


def load_settings(
    path: Path | None = None, environ: Mapping[str, str] | None = None, check_targets: TargetsCheck | None = None
) -> Settings:
    """Load and validate the settings; raise :class:`ConfigError` naming the key on any problem.

    ``path`` None means ``./settings.toml`` when it exists, else defaults plus environment. When the file
    is refused, ``check_targets`` (the CLI passes plan.py's, which config/ may not import) adds the problems
    of its targets' metrics and KPIs to the message: one run reports them all (issue 23).
    """
    environ = os.environ if environ is None else environ
    if path is None and DEFAULT_CONFIG_FILE.exists():
        path = DEFAULT_CONFIG_FILE
    data = read_toml(path) if path is not None else {}
    source = str(path) if path is not None else "configuration"
    # Every problem of the file is reported at once (issue 23): the secrets found first, then validation's.
    problems: list[str] = []
    for (section, key), variable in _SECRET_KEYS.items():
        if isinstance(data.get(section), dict) and key in data[section]:
            problems.append(f"{source}: {section}.{key}: secrets are read from the environment only ({variable})")
    problems.extend(_secret_headers(data, source))
    try:
        refuse_password_in_file(data, source)
    except ConfigError as exc:
        problems.append(str(exc))
    _apply_langfuse_env(data, environ)
    saved = os.environ.copy() if environ is not os.environ else None
    try:
        if saved is not None:  # pydantic-settings reads os.environ; give it the mapping we were handed
            os.environ.clear()
            os.environ.update(environ)
        settings = Settings(**data)
    except ValidationError as exc:
        problems.append(format_validation_error(exc, source))
    except SettingsError as exc:  # a TRACE_SCORER_… variable that is not JSON where JSON is expected
        problems.append(f"environment: {exc}")
    except RecursionError:
        problems.append(f"{source}: {_TOO_DEEP}")
    finally:
        if saved is not None:
            os.environ.clear()
            os.environ.update(saved)
    if problems and check_targets is not None and not _targets_from_environment(environ):
        problems.extend(check_targets(data.get("targets"), source))
    if problems:
        raise ConfigError("\n".join(problems))
    return settings


def _targets_from_environment(environ: Mapping[str, str]) -> bool:
    """Whether ``TRACE_SCORER_TARGETS…`` replaces the file's targets (then those are not the ones to check)."""
    return any(name.upper().startswith("TRACE_SCORER_TARGETS") for name in environ)
