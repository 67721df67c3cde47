"""One module per format family: how each provider or framework writes messages and tool calls.

Each module defines one :class:`~trace_scorer.extract.formats.base.Format` object; :data:`FORMATS` lists
them, and the readers (``extract/messages.py``, ``extract/tools.py``) ask them in this order. Adding a
format is one module here plus one entry below (docs/formats.md, "Adding a format").
"""

from trace_scorer.extract.formats.aisdk import AISDK
from trace_scorer.extract.formats.anthropic import ANTHROPIC
from trace_scorer.extract.formats.base import BlockHandler, Format, Unpacked
from trace_scorer.extract.formats.gemini import GEMINI
from trace_scorer.extract.formats.langchain import LANGCHAIN
from trace_scorer.extract.formats.openai import OPENAI
from trace_scorer.extract.formats.otel import OTEL

#: The formats, in the order they are asked. The order decides only where two formats both answer:
#: LangChain comes first because it wraps the providers' messages (its ``dumpd`` envelope is opened
#: before anything else looks at a message) and, for one call listed in several places of a message,
#: ``tool_calls`` then LangChain's ``additional_kwargs`` / ``invalid_tool_calls`` come before OpenAI's
#: legacy ``function_call``.
FORMATS: tuple[Format, ...] = (LANGCHAIN, OPENAI, ANTHROPIC, OTEL, GEMINI, AISDK)

__all__ = ["FORMATS", "BlockHandler", "Format", "Unpacked"]
