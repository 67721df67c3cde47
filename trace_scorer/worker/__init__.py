"""The long-running worker: sources, scoring batches, posting, the scheduler."""
