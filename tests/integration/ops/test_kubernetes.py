"""deploy/kubernetes: example settings (fast); overlays rendered with kubectl kustomize and every
manifest validated against the Kubernetes schemas with kubernetes-validate, offline (slow).

The ServiceMonitor is a custom resource: kubernetes-validate has no schema for it and the Prometheus
Operator's CRD schema is not vendored here, so it is checked structurally instead — apiVersion and kind,
and that its selector and port name really match the rendered Service.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.settings_examples import EXAMPLES, ROOT, load_example

KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("sidecar", "standalone")
#: The oldest Kubernetes minor still in wide use, and the newest one the validator bundles.
VERSIONS = ("1.29.0", kubernetes_validate.utils.latest_version() + ".0")
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


# -- slow: rendered and validated ---------------------------------------------------------------------------


def render(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    done = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_with_servicemonitor(overlay: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The overlay plus the optional ServiceMonitor component, as a user's kustomization would add it."""
    here = tmp_path / "with-servicemonitor"
    here.mkdir()

    def rel(path: Path) -> str:  # kustomize refuses absolute paths
        return os.path.relpath(path, here)

    (here / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {rel(KUBERNETES / 'overlays' / overlay)}\n"
        f"components:\n  - {rel(KUBERNETES / 'components' / 'servicemonitor')}\n"
    )
    return render(here)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def scorer_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = by_kind(docs, "Deployment")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "trace-scorer"]
    found: dict[str, Any] = container
    return found


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    if KUBECTL is None:
        pytest.skip("kubectl not installed")
    return {overlay: render(KUBERNETES / "overlays" / overlay) for overlay in OVERLAYS}


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_manifests_validate_strictly(rendered: dict[str, list[dict[str, Any]]], overlay: str,
                                              version: str) -> None:
    docs = rendered[overlay]
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "Deployment", "PersistentVolumeClaim", "Secret", "Service"]
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
    for volume in pod["spec"]["volumes"]:
        if "configMap" in volume:
            assert ("ConfigMap", volume["configMap"]["name"]) in names  # hash suffix rewritten
        if "persistentVolumeClaim" in volume:
            assert ("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]) in names
    container = scorer_container(docs)
    for source in container["envFrom"]:
        assert ("Secret", source["secretRef"]["name"]) in names
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/trace-scorer"]["readOnly"] is True
    assert "/var/lib/trace-scorer" in mounts and "/tmp" in mounts
    assert container["args"] == ["--config", "/etc/trace-scorer/settings.toml"]
    # The metrics Service selects this pod and reaches the container's named port.
    (service,) = by_kind(docs, "Service")
    labels = pod["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    (port,) = service["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] == "metrics"
    assert {"name": "metrics", "containerPort": 9477, "protocol": "TCP"} in container["ports"]
    assert service["spec"]["publishNotReadyAddresses"] is True
    # One writer on the state volume.
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert pod["spec"]["securityContext"]["fsGroup"] == 10001


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
    resources = container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"] and resources["limits"]["memory"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    (deployment,) = by_kind(rendered[overlay], "Deployment")
    pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (security | pod_security).get("runAsNonRoot") is True
    assert (security | pod_security).get("runAsUser") == 10001
    assert container["image"] == "registry.example.com/trace-scorer:0.1.0"


@pytest.mark.slow
@needs_kubectl
def test_sidecar_and_standalone_run_the_same_container(rendered: dict[str, list[dict[str, Any]]]) -> None:
    sidecar, standalone = (scorer_container(rendered[o]) for o in OVERLAYS)
    same = ("image", "args", "envFrom", "env", "ports", "startupProbe", "livenessProbe", "resources")
    assert {k: sidecar[k] for k in same} == {k: standalone[k] for k in same}


@pytest.mark.slow
@needs_kubectl
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_servicemonitor_component(overlay: str, tmp_path: Path) -> None:
    docs = render_with_servicemonitor(overlay, tmp_path)
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
