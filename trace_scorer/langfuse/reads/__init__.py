"""Reading traces, observations, experiments, dataset items and scores back from Langfuse,
both API generations into the same typed objects."""
