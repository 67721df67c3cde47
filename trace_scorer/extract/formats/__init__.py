"""One module per format family: how each provider or framework writes messages and tool calls."""
