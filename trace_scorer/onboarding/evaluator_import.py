"""``trace-scorer langfuse import-evaluators``: the project's evaluation rules written as a settings file.

Reads ``GET /api/public/unstable/evaluation-rules`` (legacy trace/dataset rules and v4 observation/
experiment ones) and ``/evaluators`` (default mappings), translates them (langfuse/server/rule_import.py) and
writes one ``[[targets]]`` table per rule, each commented with where it came from; the rules it could
not translate are listed at the top with the reason. The file is checked to load as settings before it
is written, and an existing file is kept unless ``--force``. TOML is written by tomli-w (comments are
ours, around its tables).
"""

from __future__ import annotations

import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from trace_scorer.config.settings import Settings
from trace_scorer.errors import UserError
from trace_scorer.langfuse.server.rule_import import ImportResult, translate_rules

KEY = "langfuse import-evaluators"

HEADER = """\
# Written by `trace-scorer langfuse import-evaluators` from {base_url} at {when}.
# One target per Langfuse evaluation rule; each llm_judge names its Langfuse evaluator, whose prompt,
# variables and output are read from Langfuse at start-up (its latest version). What differs from
# Langfuse's own run: docs/langfuse-evaluators.md.
#
# Before `trace-scorer run`: add the judge models ([[providers]], docs/judges.md) and the [state];
# `trace-scorer check --config {path}` then tries everything.
"""


def render(result: ImportResult, base_url: str, path: Path, now: datetime) -> str:
    """The settings file's text."""
    lines = [HEADER.format(base_url=base_url, when=now.strftime("%Y-%m-%dT%H:%M:%SZ"), path=path)]
    if result.skipped:
        lines.append("# Not translated:")
        lines += [f"#   - {name}: {why}" for name, why in result.skipped]
        lines.append("")
    lines.append(tomli_w.dumps({"langfuse": {"base_url": base_url}}))
    for target in result.targets:
        lines += [f"# {note}" for note in target.notes]
        lines.append(tomli_w.dumps({"targets": [target.settings]}))
    return "\n".join(lines)


def check_loads(text: str) -> None:
    """The written file must load as settings (a bug here would hand the user a broken file)."""
    data: dict[str, Any] = tomllib.loads(text)
    Settings.model_validate(data)


async def import_evaluators(settings: Settings, output: Path, *, force: bool) -> int:
    """Write ``output``; 0 when at least one target was written, 1 when no rule could be translated."""
    from trace_scorer.langfuse import LangfuseClient
    from trace_scorer.langfuse.server.evaluators import dataset_names, list_all_evaluators, list_rules

    if output.exists() and not force:  # noqa: ASYNC240 (before anything is read from Langfuse)
        raise UserError(f"{output} exists: not overwritten (--force replaces it)")
    async with LangfuseClient.failing_fast(settings.langfuse) as client:
        await client.connect()
        rules = await list_rules(client.transport, client.capabilities, KEY)
        evaluators = await list_all_evaluators(client.transport, client.capabilities, KEY)
        wanted = any(rule.get("target") in ("dataset", "experiment") for rule in rules)
        datasets = await dataset_names(client.transport) if wanted else {}
    result = translate_rules(rules, evaluators, datasets)
    text = render(result, settings.langfuse.base_url, output, datetime.now(UTC))
    check_loads(text)
    try:
        output.write_text(text, encoding="utf-8")  # noqa: ASYNC240 (one small file, the command's end)
    except OSError as exc:
        raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
    print(
        f"trace-scorer: {len(rules)} evaluation rules read; {len(result.targets)} targets written to {output}",
        file=sys.stderr,
    )
    for name, why in result.skipped:
        print(f"trace-scorer: not translated: {name}: {why}", file=sys.stderr)
    return 0 if result.targets else 1
