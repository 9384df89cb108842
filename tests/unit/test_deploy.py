"""The deployment files say what docs/deploy.md says they do: compose.yaml, the
Dockerfile, the init script, the Kubernetes manifests (parsed here; run for real only on
GitHub's runners, see tests/integration/test_deploy.py for what runs here), and the
numbers an autoscaler reads."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

from fdbrecipes.metrics import BACKLOG, ITEMS, OLDEST_AGE, Sample, by_structure
from fdbrecipes.server.releases import DEFAULT_VERSION

ROOT = Path(__file__).resolve().parents[2]


def compose() -> Dict[str, Any]:
    loaded: Dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def manifests() -> List[Dict[str, Any]]:
    text = (ROOT / "deploy" / "kubernetes" / "fdbrecipes.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def option(args: List[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_compose_runs_the_official_image_advertising_what_host_clients_reach() -> None:
    services = compose()["services"]
    assert set(services) == {"fdb", "init", "worker", "dashboard"}
    fdb = services["fdb"]
    assert fdb["image"] == f"foundationdb/foundationdb:{DEFAULT_VERSION}"
    assert fdb["environment"]["FDB_NETWORKING_MODE"] == "host"
    port = int(fdb["environment"]["FDB_PORT"])
    assert f"127.0.0.1:{port}:{port}" in fdb["ports"]
    assert "fdb-data:/var/fdb/data" in fdb["volumes"]
    cluster_file = (ROOT / "deploy" / "compose" / "fdb.cluster").read_text().strip()
    assert cluster_file == f"docker:docker@127.0.0.1:{port}"
    for name in ("init", "worker", "dashboard"):
        assert services[name]["network_mode"] == "service:fdb", name


def test_compose_creates_the_database_once_then_starts_the_worker_and_dashboard() -> None:
    services = compose()["services"]
    init = services["init"]
    assert init["image"] == services["fdb"]["image"] and init["restart"] == "no"
    assert init["entrypoint"] == ["/bin/bash", "/fdbrecipes/init-db.sh"]
    assert "./deploy/compose/init-db.sh:/fdbrecipes/init-db.sh:ro" in init["volumes"]
    assert init["environment"]["FDB_INIT_CONFIG"] == "single ssd"
    script = (ROOT / "deploy" / "compose" / "init-db.sh")
    assert script.stat().st_mode & 0o111 and "configure new $config" in script.read_text()
    for name in ("worker", "dashboard"):
        assert services[name]["build"] == "."
        assert services[name]["depends_on"]["init"]["condition"] == \
            "service_completed_successfully"
    worker = services["worker"]["command"]
    grace = int(services["worker"]["stop_grace_period"].rstrip("s"))
    assert worker[0] == "worker" and grace > float(option(worker, "--shutdown-timeout"))
    dashboard = services["dashboard"]["command"]
    assert dashboard[0] == "web" and "--read-only" in dashboard
    assert "127.0.0.1:10096:10096" in services["fdb"]["ports"]  # the dashboard's port


def test_the_dockerfile_has_the_matching_client_a_non_root_user_and_tini() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert f"ARG FDB_VERSION={DEFAULT_VERSION}" in text
    assert 'foundationdb-clients_${FDB_VERSION}-1_${arch}.deb' in text
    assert "sha256sum -c -" in text and '"$deb.sha256"' in text
    assert '"foundationdb==${FDB_VERSION}"' in text  # bindings of the library's version
    users = re.findall(r"^USER (\S+)", text, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    entrypoint = re.search(r"^ENTRYPOINT (.+)$", text, re.MULTILINE)
    assert entrypoint is not None
    assert json.loads(entrypoint.group(1)) == ["/usr/bin/tini", "--", "fdbrecipes"]  # exec form
    example = re.search(r"^COPY deploy/compose/example.py (\S+)", text, re.MULTILINE)
    assert example is not None and (ROOT / "deploy/compose/example.py").is_file()
    assert (ROOT / ".dockerignore").is_file()


def test_the_kubernetes_workers_drain_within_their_grace_and_scale_on_the_backlog() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in manifests()}
    cluster = objects[("FoundationDBCluster", "fdbrecipes-db")]
    assert cluster["spec"]["version"] == DEFAULT_VERSION
    worker = objects[("Deployment", "fdbrecipes-worker")]["spec"]["template"]["spec"]
    args = worker["containers"][0]["args"]
    assert args[0] == "worker"
    assert worker["terminationGracePeriodSeconds"] > float(option(args, "--shutdown-timeout"))
    assert worker["securityContext"]["runAsNonRoot"] is True
    volume = worker["volumes"][0]["configMap"]
    assert volume["name"] == "fdbrecipes-db-config"  # the operator's ConfigMap
    assert volume["items"] == [{"key": "cluster-file", "path": "fdb.cluster"}]
    assert "subPath" not in worker["containers"][0]["volumeMounts"][0]

    budget = objects[("PodDisruptionBudget", "fdbrecipes-worker")]["spec"]
    assert budget["maxUnavailable"] == 1
    assert budget["selector"]["matchLabels"] == \
        objects[("Deployment", "fdbrecipes-worker")]["spec"]["selector"]["matchLabels"]

    dashboard = objects[("Deployment", "fdbrecipes-dashboard")]["spec"]["template"]["spec"]
    assert dashboard["containers"][0]["args"][0] == "web"
    assert "--read-only" in dashboard["containers"][0]["args"]

    metrics = objects[("Deployment", "fdbrecipes-metrics")]
    metrics_args = metrics["spec"]["template"]["spec"]["containers"][0]["args"]
    assert metrics["spec"]["replicas"] == 1 and metrics_args[0] == "metrics"
    queue = option(metrics_args, "--directory").split("/")[-1]  # the queue label
    port = option(metrics_args, "--port")
    # The Service, KEDA and the kubelet's probe reach the pod's address, not its loopback.
    assert option(metrics_args, "--host") == "0.0.0.0"
    scaled = objects[("ScaledObject", "fdbrecipes-worker")]["spec"]
    assert scaled["scaleTargetRef"]["name"] == "fdbrecipes-worker"
    locations = []
    for trigger in scaled["triggers"]:
        meta = trigger["metadata"]
        assert trigger["type"] == "metrics-api" and meta["format"] == "json"
        assert meta["url"] == \
            f"http://fdbrecipes-metrics.default.svc.cluster.local:{port}/backlog"
        locations.append(meta["valueLocation"])
    assert locations == [f"{queue}.backlog", f"{queue}.oldest_age_seconds"]


def test_the_backlog_json_is_what_the_scaledobject_reads() -> None:
    samples = [Sample(ITEMS, (("queue", "jobs"), ("state", state)), value)
               for state, value in (("visible", 120.0), ("delayed", 3.0),
                                    ("in_flight", 10.0), ("dead", 0.0))]
    samples += [Sample(BACKLOG, (("queue", "jobs"),), 130.0),
                Sample(OLDEST_AGE, (("queue", "jobs"),), 42.5)]
    assert by_structure(samples) == {"jobs": {
        "visible": 120.0, "delayed": 3.0, "in_flight": 10.0, "dead": 0.0, "backlog": 130.0,
        "oldest_age_seconds": 42.5}}


@pytest.mark.parametrize("page", ["docs/deploy.md"])
def test_the_deploy_page_names_the_files_that_exist(page: str) -> None:
    text = (ROOT / page).read_text()
    for path in re.findall(r"blob/main/([\w./-]+)\)", text):
        assert (ROOT / path).exists(), path
    for command in re.findall(r"^fdbrecipes .+$", text, re.MULTILINE):
        shlex.split(command, comments=True)  # each shown command parses


def test_the_workflow_parses_and_runs_the_routes_github_verifies() -> None:
    """GitHub reads the workflow as YAML: a plain value holding ': ' is not YAML (the
    docs job's step name was one), and then no job runs at all."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    jobs = workflow["jobs"]
    assert {"test", "first-hour", "compose", "docs"} <= set(jobs)
    assert set(jobs["first-hour"]["strategy"]["matrix"]["os"]) == \
        {"ubuntu-22.04", "ubuntu-22.04-arm", "macos-14", "macos-15-intel"}
    steps = " ".join(str(step.get("run", "")) for step in jobs["compose"]["steps"])
    assert "docker compose up -d --build" in steps and "docker compose stop" in steps
