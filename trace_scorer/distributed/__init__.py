"""Several replicas sharing the work through PostgreSQL: the job queue (procrastinate), the planning of each
target's windows into batch jobs, and request budgets that hold for the whole fleet."""
