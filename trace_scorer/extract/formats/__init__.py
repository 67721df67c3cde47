"""One module per format family: how each provider or framework writes messages and tool calls.

Each module defines one :class:`~trace_scorer.extract.formats.base.Format` object; :data:`FORMATS` lists
them, and the readers (``extract/messages.py``, ``extract/tools.py``) ask them in this order. Adding a
format is one module here plus one entry below (docs/formats.md, "Adding a format"), or, from another
package, an instance of a ``Format`` subclass under the entry-point group ``trace_scorer.formats``
(asked after these; loaded on first use: ``installed_formats``).
"""

from functools import cache

from trace_scorer.extract.formats.aisdk import AISDK
from trace_scorer.extract.formats.anthropic import ANTHROPIC
from trace_scorer.extract.formats.base import BlockHandler, Format, Unpacked
from trace_scorer.extract.formats.gemini import GEMINI
from trace_scorer.extract.formats.langchain import LANGCHAIN
from trace_scorer.extract.formats.openai import OPENAI
from trace_scorer.extract.formats.otel import OTEL
from trace_scorer.runtime.plugins import FORMATS_GROUP, load_plugins

#: The formats, in the order they are asked. The order decides only where two formats both answer:
#: LangChain comes first because it wraps the providers' messages (its ``dumpd`` envelope is opened
#: before anything else looks at a message) and, for one call listed in several places of a message,
#: ``tool_calls`` then LangChain's ``additional_kwargs`` / ``invalid_tool_calls`` come before OpenAI's
#: legacy ``function_call``.
FORMATS: tuple[Format, ...] = (LANGCHAIN, OPENAI, ANTHROPIC, OTEL, GEMINI, AISDK)


@cache
def installed_formats() -> tuple[Format, ...]:
    """The built-in formats, then the installed plug-ins' (``trace_scorer.formats`` entry points).

    Loaded on first use, not at import: a plug-in's module imports ``formats.base``, which would
    otherwise load the plug-in while its module is still half-imported."""
    # Format is a Protocol that formats subclass: isinstance() would need @runtime_checkable, which
    # checks members only; the class's ancestry is what says it was written as a Format.
    plugins = load_plugins(FORMATS_GROUP, lambda obj: Format in type(obj).__mro__, "an instance of a Format subclass")
    return (*FORMATS, *plugins)

__all__ = ["FORMATS", "BlockHandler", "Format", "Unpacked", "installed_formats"]
