"""A judge prompt written by the user (``llm_judge``, Langfuse's evaluators): ``{{variable}}`` placeholders
filled with values from the trace, each value quoted in a fenced block.

The template is trusted (it comes from the settings or the project's Langfuse); the values are not. They
are substituted in one pass (a value holding ``{{other}}`` stays as it is: it is never read as a
placeholder), and each is fenced like every other judge prompt's data (judge/prompts.py: a block whose
closing line carries a digest of the data, so a value cannot forge it).

Hand-written rather than Jinja2 or chevron: Langfuse's evaluator syntax is exactly ``{{name}}`` with
optional spaces and no logic, and a template engine would also interpret ``{% ... %}``, filters or
sections that a Langfuse template means literally.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from trace_scorer.config.references import PLACEHOLDER, template_variables
from trace_scorer.judge.prompts import data_id, neutralise

__all__ = ["PLACEHOLDER", "render_template", "template_variables"]


def render_template(template: str, values: Mapping[str, str], *, fence: bool = True) -> str:
    """``template`` with every placeholder replaced by its value (KeyError for a variable without one).

    One pass over the template: text that a value brings in is never scanned for placeholders. With
    ``fence``, each value is quoted in a ``<<<BEGIN VARIABLE name id>>>`` block.
    """
    missing = [name for name in template_variables(template) if name not in values]
    if missing:
        raise KeyError(", ".join(missing))
    ident = data_id(dict(values))

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        value = values[name]
        if not fence:
            return value
        clean = neutralise(value)
        return f"\n<<<BEGIN VARIABLE {name} {ident}>>>\n{clean}\n<<<END VARIABLE {name} {ident}>>>\n"

    return PLACEHOLDER.sub(value_of, template)
