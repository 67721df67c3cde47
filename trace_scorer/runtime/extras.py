"""Optional extras: whether one is installed, and the pip command that installs it for *this* install.

A checkout installed with ``pip install -e .`` gets an extra with ``pip install -e '.[report]'`` run in
the checkout; ``pip install 'trace-scorer[report]'`` there would fetch a second copy from PyPI. pip
records how a distribution was installed in its ``direct_url.json`` (PEP 610): absent for an index
install, ``dir_info`` (``editable`` or not) for a local folder.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from importlib import metadata
from urllib.parse import unquote, urlparse

from trace_scorer.errors import UserError

DISTRIBUTION = "trace-scorer"


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The top-level modules of ``modules`` that cannot be imported (found without importing them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def _local_folder(direct_url: dict[str, object]) -> tuple[str, bool] | None:
    """The folder a local install came from and whether it is editable; None for anything else."""
    url = direct_url.get("url")
    info = direct_url.get("dir_info")
    if not isinstance(url, str) or not isinstance(info, dict):
        return None
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path), bool(info.get("editable"))


def install_command(extra: str) -> str:
    """The command that adds ``extra`` to this installation of trace-scorer."""
    # The first copy pip recorded (a checkout's own *.egg-info, found first from inside it, records nothing).
    texts = (dist.read_text("direct_url.json") for dist in metadata.distributions(name=DISTRIBUTION))
    text = next((t for t in texts if t), None)
    local = None
    if text:
        try:
            recorded = json.loads(text)
        except ValueError:
            recorded = None
        if isinstance(recorded, dict):
            local = _local_folder(recorded)
    if local is None:
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    folder, editable = local
    if editable:
        return f"pip install -e '.[{extra}]' (in the checkout, {folder})"
    return f"pip install '{folder}[{extra}]'"


def require_extra(extra: str, modules: Sequence[str], purpose: str) -> None:
    """Raise :class:`UserError` naming the install command when a module of ``extra`` is missing.

    Called before any work is done, so a missing extra costs the user nothing but the message.
    """
    missing = missing_modules(modules)
    if missing:
        raise UserError(f"{purpose} needs {', '.join(missing)} (the {extra!r} extra): {install_command(extra)}")
