"""trace-scorer: automatic, idempotent quality scores for AI-agent traces in Langfuse."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trace-scorer")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
