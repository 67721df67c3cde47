"""``[http]``: the worker's operations endpoints (``/healthz``, ``/readyz``, ``/metrics``).

Only ``trace-scorer run`` serves them; the offline ``score`` command never opens a port.

The bind address defaults to loopback so that a worker started by hand on a laptop or a shared host
exposes nothing. Inside a container the endpoints must be reachable from outside the container's own
loopback (the kubelet probes the pod IP, Prometheus scrapes it): the image sets
``TRACE_SCORER_HTTP__HOST=0.0.0.0``, and the Kubernetes and Compose examples say so explicitly. The
endpoints carry no secrets and accept no writes.

Binding ``0.0.0.0`` lets anything in the cluster network connect. That stays (binding the pod IP alone
would need it passed in, and gains nothing against a client on the same network); what makes it safe is
that connections held open cannot hold the probes down (``ops/server.py``: no connection is refused, the
clients holding the most lose their oldest). A NetworkPolicy can keep the port off the network entirely.

Default port 9477, not 9464: 9464 is the OpenTelemetry Prometheus exporter's default, which an agent
in the same pod (one network namespace for all its containers) may already use.
"""

from __future__ import annotations

from pydantic import Field

from trace_scorer.config.common import Duration, StrictModel


class HttpSettings(StrictModel):
    #: Serve the endpoints from ``trace-scorer run``.
    enabled: bool = True
    #: Bind address: 127.0.0.1 (default, loopback only), 0.0.0.0 in containers, or "::" for IPv6.
    host: str = "127.0.0.1"
    #: TCP port; 0 picks a free one (tests).
    port: int = Field(default=9477, ge=0, le=65535)
    #: ``/healthz`` fails when a target's last tick started more than this many of its intervals ago.
    liveness_intervals: float = Field(default=3.0, gt=1.0)
    #: ...but never sooner than this (a 10 s interval must not make a 30 s slow tick fatal).
    liveness_min: Duration = 120.0
