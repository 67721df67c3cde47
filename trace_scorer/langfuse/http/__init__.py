"""How requests reach Langfuse: the transport, its retries and request budget, counters by
endpoint, the endpoint table, and the server's clock read off its answers."""
