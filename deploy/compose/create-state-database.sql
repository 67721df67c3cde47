-- trace-scorer's own database and user on Langfuse's PostgreSQL, for the distributed workers
-- (deploy/docker-compose.yml, profile "distributed": the one-shot service trace-scorer-database runs it
-- at every `up`). Idempotent: the user and the database are created once, the password set every time
-- (so a changed TRACE_SCORER_DB_PASSWORD is applied). The user owns the database and nothing else: not a
-- superuser, no access to Langfuse's tables.
--
-- Run by psql as the server's superuser (PGHOST, PGUSER, PGPASSWORD), with
--   TRACE_SCORER_DB_PASSWORD   the new user's password (required)
--   TRACE_SCORER_DB_NAME       the database's and the user's name (default trace_scorer)
-- e.g. TRACE_SCORER_DB_PASSWORD=… psql -h localhost -U postgres -f create-state-database.sql
\set ON_ERROR_STOP on
\getenv password TRACE_SCORER_DB_PASSWORD
\getenv name TRACE_SCORER_DB_NAME
\if :{?name}
\else
  \set name trace_scorer
\endif
\if :{?password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'TRACE_SCORER_DB_PASSWORD is not set: the password of trace-scorer''s database user'; END $$;
\endif

SELECT format('CREATE ROLE %I LOGIN', :'name')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'name') \gexec
SELECT format('ALTER ROLE %I WITH LOGIN NOSUPERUSER PASSWORD %L', :'name', :'password') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'name', :'name')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'name') \gexec
-- Only its user (and superusers) connect to it.
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', :'name') \gexec
