"""trace-scorer: automatic, idempotent quality scores for AI-agent traces in Langfuse."""


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata when first asked (importlib.metadata costs every
    command's start-up time otherwise)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trace-scorer")
    except PackageNotFoundError:  # running from a source tree that was not installed
        return "0.0.0+unknown"
