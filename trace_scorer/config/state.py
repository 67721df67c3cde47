"""``[state]``: where the worker remembers — an SQLite file (the default) or a PostgreSQL database that
several workers share."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr, field_validator, model_validator

from trace_scorer.config.common import ConfigError, StrictModel

#: A schema name the PostgreSQL state accepts: an unquoted lower-case identifier (at most 63 characters).
SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Where a password for the PostgreSQL state may come from (never the settings file).
PASSWORD_SOURCES = "TRACE_SCORER_STATE__URL, PGPASSWORD or ~/.pgpass"


def url_password(url: str) -> str | None:
    """The password a PostgreSQL URL carries (in its userinfo or as ``?password=``), if any."""
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict  # deferred: only a configured url loads the driver

    try:
        password = conninfo_to_dict(url).get("password")
    except Error:
        return None
    return str(password) if password else None


class StateSettings(StrictModel):
    #: The SQLite file with watermarks and the scoring ledger (put it on a persistent volume). Not with url.
    path: str = "trace-scorer.db"
    #: PostgreSQL instead of the file (``postgresql://user@host:5432/database``): the state several workers
    #: share. A password only from the environment (TRACE_SCORER_STATE__URL, PGPASSWORD, ~/.pgpass).
    url: SecretStr | None = None
    #: The PostgreSQL schema holding the state's tables (created if missing); only with url. (Not ``schema``:
    #: that name would shadow pydantic's ``BaseModel.schema``.)
    db_schema: str = "trace_scorer"

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        text = value.get_secret_value()
        if not text.startswith(("postgresql://", "postgres://")):
            raise ValueError("expected a PostgreSQL URL: postgresql://user@host:5432/database")
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(text)
        except Error:
            # The driver's message may quote the URL, password included: say what is wrong without it.
            raise ValueError("not a valid PostgreSQL URL (postgresql://user@host:5432/database?option=value)") from None
        return value

    @field_validator("db_schema")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        if not SCHEMA_NAME.match(value):
            raise ValueError(f"{value!r} is not a schema name: lower-case letters, digits and _, at most 63")
        return value

    @model_validator(mode="after")
    def _one_place(self) -> StateSettings:
        if self.url is not None and "path" in self.model_fields_set:
            raise ValueError(
                "state.path and state.url are exclusive: url keeps the state in PostgreSQL, path in an SQLite "
                "file. Remove state.path (from the settings file, or TRACE_SCORER_STATE__PATH) to use url"
            )
        if self.url is None and "db_schema" in self.model_fields_set:
            raise ValueError("state.db_schema is only used with state.url (PostgreSQL)")
        return self

    @property
    def postgres_url(self) -> str | None:
        return None if self.url is None else self.url.get_secret_value()


def refuse_password_in_file(data: Mapping[str, Any], source: str) -> None:
    """``[state] url`` in the settings file may not carry a password (secrets come from the environment)."""
    section = data.get("state")
    url = section.get("url") if isinstance(section, Mapping) else None
    if isinstance(url, str) and url.startswith(("postgresql://", "postgres://")) and url_password(url):
        raise ConfigError(
            f"{source}: state.url: carries a password, and secrets are read from the environment only: remove it "
            f"from the file and give it in {PASSWORD_SOURCES}"
        )
