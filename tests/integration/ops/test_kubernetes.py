"""deploy/kubernetes: example settings (fast); overlays rendered with kubectl kustomize and every
manifest validated against the Kubernetes schemas with kubernetes-validate, offline (slow).

The ServiceMonitor is a custom resource: kubernetes-validate has no schema for it and the Prometheus
Operator's CRD schema is not vendored here, so it is checked structurally instead — apiVersion and kind,
and that its selector and port name really match the rendered Service. Likewise the prometheus-adapter
rule behind the distributed overlay's autoscaler: its query parses as PromQL and names the metric the
worker exports, with the labels the HorizontalPodAutoscaler selects.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import promql_parser
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import conninfo_to_dict

from tests.support.clocks import ManualClock
from tests.support.paths import ROOT
from tests.support.settings_examples import EXAMPLES, load_example
from trace_scorer.cli import main
from trace_scorer.config import Settings, load_settings
from trace_scorer.ops import Telemetry

KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("sidecar", "standalone", "distributed")
#: The overlays whose worker keeps an SQLite state on a volume: one replica, one writer.
SINGLE_WRITER = ("sidecar", "standalone")
DISTRIBUTED = KUBERNETES / "overlays" / "distributed"
#: What each overlay renders, by kind.
KINDS = {
    "sidecar": ["ConfigMap", "Deployment", "PersistentVolumeClaim", "Secret", "Service"],
    "standalone": ["ConfigMap", "Deployment", "PersistentVolumeClaim", "Secret", "Service"],
    "distributed": ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Secret", "Service"],
}
#: The oldest Kubernetes minor still in wide use, and the newest one the validator bundles.
VERSIONS = ("1.29.0", kubernetes_validate.utils.major_minor(kubernetes_validate.utils.latest_version()) + ".0")
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed (Debian package 'kubectl')")

K8S_EXAMPLES = [p for p in EXAMPLES if KUBERNETES in p.parents]


# -- fast: the files themselves ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", K8S_EXAMPLES, ids=lambda p: str(p.relative_to(KUBERNETES)))
def test_example_settings_validate(path: Path) -> None:
    settings = load_example(path)
    assert settings.http.host == "0.0.0.0" and settings.http.port == 9477
    assert settings.log.format == "json"
    assert settings.langfuse.secret_key is None  # secrets come from the Secret, never the ConfigMap


@pytest.mark.parametrize("path", [p for p in K8S_EXAMPLES if "overlays" in p.parts], ids=lambda p: p.parent.name)
def test_every_target_filters_to_one_agent(path: Path) -> None:
    settings = load_example(path)
    assert settings.targets
    for target in settings.targets:
        chosen = {k: v for k, v in target.model_dump()["filter"].items() if v}
        assert chosen.get("trace_name"), f"{target.name}: no trace-name filter"


def test_secrets_are_placeholders() -> None:
    for line in (KUBERNETES / "base" / "secrets.env").read_text().splitlines():
        name, _, value = line.partition("=")
        assert value.endswith("REPLACE_ME"), name
    (line,) = (DISTRIBUTED / "database.env").read_text().splitlines()
    name, _, url = line.partition("=")
    assert name == "url"
    assert conninfo_to_dict(url)["password"] == "REPLACE_ME"


def database_url() -> str:
    """The (placeholder) state URL of the distributed overlay's Secret generator."""
    return (DISTRIBUTED / "database.env").read_text().strip().partition("=")[2]


def test_distributed_settings_keep_the_state_in_postgres() -> None:
    """Loaded as a replica loads it, with the Secret's URL in its environment; the file names no URL."""
    path = DISTRIBUTED / "settings.toml"
    assert load_example(path).state.url is None  # the URL (and its password) only from the environment
    settings = load_settings(path, environ={"TRACE_SCORER_STATE__URL": database_url()})
    assert settings.state.postgres_url == database_url()
    assert settings.worker.jobs >= 1


# -- slow: rendered and validated ---------------------------------------------------------------------------


def render(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_with_components(overlay: str, components: list[Path], tmp_path: Path) -> list[dict[str, Any]]:
    """The overlay plus optional components, as a user's kustomization would add them."""
    here = tmp_path / "with-components"
    here.mkdir()

    def rel(path: Path) -> str:  # kustomize refuses absolute paths
        return os.path.relpath(path, here)

    listed = "".join(f"  - {rel(c)}\n" for c in components)
    (here / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {rel(KUBERNETES / 'overlays' / overlay)}\ncomponents:\n{listed}"
    )
    return render(here)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = by_kind(docs, "Deployment")
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def scorer_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = [c for c in pod_spec(docs)["containers"] if c["name"] == "trace-scorer"]
    found: dict[str, Any] = container
    return found


def trace_scorer_containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every container running the trace-scorer image: the worker and, where there is one, its init step."""
    spec = pod_spec(docs)
    image = scorer_container(docs)["image"]
    return [c for c in spec.get("initContainers", []) + spec["containers"] if c["image"] == image]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def secret_value(docs: list[dict[str, Any]], name: str, key: str) -> str:
    (secret,) = [d for d in by_kind(docs, "Secret") if d["metadata"]["name"] == name]
    return base64.b64decode(secret["data"][key]).decode()


def rendered_settings(docs: list[dict[str, Any]], environ: dict[str, str], tmp_path: Path) -> Settings:
    """settings.toml as the rendered ConfigMap carries it, loaded as the worker loads it."""
    (config_map,) = by_kind(docs, "ConfigMap")
    path = tmp_path / "settings.toml"
    path.write_text(config_map["data"]["settings.toml"])
    return load_settings(path, environ=environ)


def cli_accepts(argv: list[str], capsys: pytest.CaptureFixture[str]) -> bool:
    """Whether trace-scorer's command line takes these arguments (asked with --help: nothing runs)."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    capsys.readouterr()
    return exited.value.code == 0


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    if KUBECTL is None:
        pytest.skip("kubectl not installed")
    return {overlay: render(KUBERNETES / "overlays" / overlay) for overlay in OVERLAYS}


@pytest.fixture(scope="module")
def autoscaled(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The distributed overlay with its autoscaling component."""
    if KUBECTL is None:
        pytest.skip("kubectl not installed")
    return render_with_components("distributed", [DISTRIBUTED / "autoscaling"], tmp_path_factory.mktemp("hpa"))


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_manifests_validate_strictly(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, version: str
) -> None:
    docs = rendered[overlay]
    assert sorted(d["kind"] for d in docs) == KINDS[overlay]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.slow
@needs_kubectl
def test_the_validator_catches_mistakes(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = copy.deepcopy(rendered["standalone"])
    container = scorer_container(docs)
    container["livenesProbe"] = container.pop("livenessProbe")  # a typo must not pass unnoticed
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(by_kind(docs, "Deployment")[0], VERSIONS[-1], strict=True)


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_references_resolve(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    docs = rendered[overlay]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    (deployment,) = by_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]
    assert selects(deployment["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
    for volume in pod["spec"]["volumes"]:
        if "configMap" in volume:
            assert ("ConfigMap", volume["configMap"]["name"]) in names  # hash suffix rewritten
        if "persistentVolumeClaim" in volume:
            assert ("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]) in names
    volume_names = {v["name"] for v in pod["spec"]["volumes"]}
    for container in trace_scorer_containers(docs):
        for source in container.get("envFrom", []):
            assert ("Secret", source["secretRef"]["name"]) in names
        for variable in container.get("env", []):
            if "valueFrom" in variable:
                ref = variable["valueFrom"]["secretKeyRef"]
                assert secret_value(docs, ref["name"], ref["key"])  # the Secret exists and has the key
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/etc/trace-scorer"]["readOnly"] is True
        assert "/tmp" in mounts  # the root filesystem is read-only
        assert {m["name"] for m in container["volumeMounts"]} <= volume_names
    container = scorer_container(docs)
    assert container["args"] == ["--config", "/etc/trace-scorer/settings.toml"]
    # The metrics Service selects this pod and reaches the container's named port.
    (service,) = by_kind(docs, "Service")
    assert selects(service["spec"]["selector"], pod["metadata"]["labels"])
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] == "metrics"
    assert {"name": "metrics", "containerPort": 9477, "protocol": "TCP"} in container["ports"]
    assert service["spec"]["publishNotReadyAddresses"] is True


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", SINGLE_WRITER)
def test_one_writer_on_the_state_volume(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    docs = rendered[overlay]
    (deployment,) = by_kind(docs, "Deployment")
    mounts = {m["mountPath"] for m in scorer_container(docs)["volumeMounts"]}
    assert "/var/lib/trace-scorer" in mounts
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert pod_spec(docs)["securityContext"]["fsGroup"] == 10001


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_resources_security(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    container = scorer_container(rendered[overlay])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    if overlay == "sidecar":
        # a failing /readyz must not take the agent's pod out of its Service
        assert "readinessProbe" not in container
    else:
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    pod_security = pod_spec(rendered[overlay])["securityContext"]
    for each in trace_scorer_containers(rendered[overlay]):
        resources = each["resources"]
        assert resources["requests"]["cpu"] and resources["requests"]["memory"] and resources["limits"]["memory"]
        security = each["securityContext"]
        assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
        assert security["capabilities"]["drop"] == ["ALL"]
        assert (security | pod_security).get("runAsNonRoot") is True
        assert (security | pod_security).get("runAsUser") == 10001
        assert each["image"] == "registry.example.com/trace-scorer:0.1.0"


@pytest.mark.slow
@needs_kubectl
def test_sidecar_and_standalone_run_the_same_container(rendered: dict[str, list[dict[str, Any]]]) -> None:
    sidecar, standalone = (scorer_container(rendered[o]) for o in ("sidecar", "standalone"))
    same = ("image", "args", "envFrom", "env", "ports", "startupProbe", "livenessProbe", "resources")
    assert {k: sidecar[k] for k in same} == {k: standalone[k] for k in same}


@pytest.mark.slow
@needs_kubectl
def test_distributed_runs_the_standalone_container_with_a_database(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    standalone, distributed = (scorer_container(rendered[o]) for o in ("standalone", "distributed"))
    same = (
        "image",
        "args",
        "envFrom",
        "ports",
        "startupProbe",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "securityContext",
    )
    assert {k: standalone[k] for k in same} == {k: distributed[k] for k in same}
    added = [v for v in distributed["env"] if v not in standalone["env"]]
    assert [v["name"] for v in added] == ["TRACE_SCORER_STATE__URL"]


@pytest.mark.slow
@needs_kubectl
def test_distributed_replicas_share_a_database_not_a_volume(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    docs = rendered["distributed"]
    (deployment,) = by_kind(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    # A new replica is up before an old one stops: never fewer than 3 during a rollout.
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert not by_kind(docs, "PersistentVolumeClaim")
    pod = pod_spec(docs)
    assert all(set(v) <= {"name", "configMap", "emptyDir"} for v in pod["volumes"])  # nothing persistent
    for container in trace_scorer_containers(docs):
        assert "/var/lib/trace-scorer" not in {m["mountPath"] for m in container["volumeMounts"]}
    # The database URL from the Secret, as TRACE_SCORER_STATE__URL; what it holds is what the replicas load.
    (variable,) = [v for v in scorer_container(docs)["env"] if v["name"] == "TRACE_SCORER_STATE__URL"]
    ref = variable["valueFrom"]["secretKeyRef"]
    assert ref["name"].startswith("trace-scorer-database-") and ref.get("optional") is not True
    url = secret_value(docs, ref["name"], ref["key"])
    assert url == database_url()
    settings = rendered_settings(docs, {"TRACE_SCORER_STATE__URL": url}, tmp_path)
    assert settings.state.postgres_url == url
    # SIGTERM: the batches in hand finish within shutdown_grace, before the kubelet's SIGKILL.
    assert pod["terminationGracePeriodSeconds"] > settings.worker.shutdown_grace
    # Spread over nodes: one node's failure takes one replica.
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert selects(spread["labelSelector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])


@pytest.mark.slow
@needs_kubectl
def test_distributed_migrates_before_the_worker_starts(
    rendered: dict[str, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    docs = rendered["distributed"]
    (init,) = pod_spec(docs)["initContainers"]
    worker = scorer_container(docs)
    assert init["image"] == worker["image"]  # the release the pod runs migrates
    assert init["command"][0] == "trace-scorer"
    assert cli_accepts(init["command"][1:] + init["args"], capsys)
    assert init["command"][1:3] == ["state", "migrate"]
    assert init["args"] == worker["args"]  # the same settings file
    assert [v for v in init["env"] if v["name"] == "TRACE_SCORER_STATE__URL"] == [
        v for v in worker["env"] if v["name"] == "TRACE_SCORER_STATE__URL"
    ]
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    for mount in init["volumeMounts"]:
        assert mounts[mount["mountPath"]]["name"] == mount["name"]
    # The worker's own command as the image runs it (ENTRYPOINT trace-scorer run, then the args).
    assert cli_accepts(["run", *worker["args"]], capsys)


@pytest.mark.slow
@needs_kubectl
def test_distributed_disruption_budget(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["distributed"]
    (budget,) = by_kind(docs, "PodDisruptionBudget")
    (deployment,) = by_kind(docs, "Deployment")
    assert budget["apiVersion"] == "policy/v1"
    assert selects(budget["spec"]["selector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])
    # A drain can always take one replica (it would block forever at minAvailable == replicas) and never more.
    assert budget["spec"] == budget["spec"] | {"maxUnavailable": 1}
    assert "minAvailable" not in budget["spec"]


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("version", VERSIONS)
def test_autoscaler_validates_and_targets_the_deployment(autoscaled: list[dict[str, Any]], version: str) -> None:
    assert sorted(d["kind"] for d in autoscaled) == sorted(KINDS["distributed"] + ["HorizontalPodAutoscaler"])
    for doc in autoscaled:
        kubernetes_validate.validate(doc, version, strict=True)
    (hpa,) = by_kind(autoscaled, "HorizontalPodAutoscaler")
    (deployment,) = by_kind(autoscaled, "Deployment")
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        deployment["apiVersion"],
        "Deployment",
        deployment["metadata"]["name"],
    )
    # The HPA owns the replica count: a fixed one would be reset by every `kubectl apply`.
    assert "replicas" not in deployment["spec"]
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]


def queue_samples() -> list[dict[str, str]]:
    """The labels of trace_scorer_queue_jobs as a replica's /metrics shows them."""
    telemetry = Telemetry(clock=ManualClock())
    telemetry.queue_jobs({("agent", "batch", "todo"): 5, ("agent", "plan", "doing"): 1})
    text = generate_latest(telemetry.registry).decode()
    return [
        dict(sample.labels)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "trace_scorer_queue_jobs"
    ]


@pytest.mark.slow
@needs_kubectl
def test_autoscaler_metric_is_the_exported_queue(autoscaled: list[dict[str, Any]]) -> None:
    """The HPA's External metric, the prometheus-adapter rule that serves it, and the gauge the worker
    exports agree: name, labels, a query Prometheus parses."""
    (hpa,) = by_kind(autoscaled, "HorizontalPodAutoscaler")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"  # the fleet's one queue: a Pods metric would average it per pod
    wanted = metric["external"]["metric"]
    assert metric["external"]["target"]["type"] == "AverageValue"
    assert float(metric["external"]["target"]["averageValue"]) > 0
    selector = wanted["selector"]["matchLabels"]
    assert selector["state"] == "todo"
    samples = queue_samples()
    assert any(selects(selector, labels) for labels in samples)  # a series the HPA's selector picks
    assert all(set(selector) <= set(labels) for labels in samples)

    values = yaml.safe_load((DISTRIBUTED / "autoscaling" / "prometheus-adapter-values.yaml").read_text())
    (rule,) = values["rules"]["external"]
    assert rule["name"]["as"] == wanted["name"]
    series = promql_parser.parse(rule["seriesQuery"])
    assert isinstance(series, promql_parser.VectorSelector) and series.name == "trace_scorer_queue_jobs"
    matchers = ",".join(f'{k}="{v}"' for k, v in {"namespace": "scoring", **selector}.items())
    query = rule["metricsQuery"].replace("<<.Series>>", series.name).replace("<<.LabelMatchers>>", matchers)
    parsed = promql_parser.parse(query)
    # One value per target, the same on every replica: the max over replicas, not their sum (which would
    # count the queue once per replica); the HPA sums what it gets over the targets.
    assert isinstance(parsed, promql_parser.AggregateExpr) and str(parsed.op) == "max"
    assert parsed.modifier is not None and set(parsed.modifier.labels) <= set(samples[0]) - {"namespace"}
    assert "target" in parsed.modifier.labels
    assert isinstance(parsed.expr, promql_parser.VectorSelector) and parsed.expr.name == series.name
    # The HPA's namespace reaches the query as a label matcher.
    assert rule["resources"]["overrides"]["namespace"]["resource"] == "namespace"


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_servicemonitor_component(overlay: str, tmp_path: Path) -> None:
    docs = render_with_components(overlay, [KUBERNETES / "components" / "servicemonitor"], tmp_path)
    (monitor,) = by_kind(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):  # why it is checked by hand below
        kubernetes_validate.validate(monitor, VERSIONS[-1], strict=True)
    (service,) = by_kind(docs, "Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert all(service["metadata"]["labels"].get(k) == v for k, v in selector.items())
    port_names = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
    for doc in docs:
        if doc["kind"] != "ServiceMonitor":
            kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)
