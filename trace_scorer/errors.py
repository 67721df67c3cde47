"""The one root of every error the user must fix — configuration, credentials, a server that cannot
serve what is configured. The CLI catches it once and exits 2 with its message; nothing else is ever
reported that way."""

from __future__ import annotations


class UserError(Exception):
    """Something only the user can fix; the message says what and where. The CLI exits 2 on it."""

    #: Printed before the message (e.g. "configuration error:" and a new line).
    heading = ""
