"""The Kubernetes recipe (deploy/k8s) as an operator meets it, checked without a cluster: adding users, the Ingress,
filling the sources volume, Ollama pinned with its model kept, pods sized from measured peaks, git in the image,
the run pod as dagster-k8s renders it (validated against Kubernetes' schemas), the pools and run monitoring the
chart configures (read by Dagster's own instance config)."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml
from click.testing import CliRunner
from test_k8s_recipe import (DEPLOY, K8S_VERSION, ROOT, code_location, example_config, location_container_context,
                             manifest, manifests, run_launcher_config, snake, values)

# Peak memory (MB) measured with `python bench/pod_memory.py` (bench/RESULTS.md): a run pod OCR-ing scans (its
# RapidOCR worker included), a run pod with the bundled embedder, the code server, the search server.
MEASURED_MB = {"ocr run": 1063, "bundled run": 261, "code server": 113, "search": 156}
SEARCH_HOST = "search.example.org"


def containers(doc: dict) -> list[dict]:
    spec = doc["spec"]["template"]["spec"] if "template" in doc["spec"] else doc["spec"]
    return spec["containers"]


def search_container() -> dict:
    (container,) = containers(manifest("Deployment", "local-rag-search"))
    return container


def flag_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


def mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(Mi|Gi)", quantity).groups()
    return float(number) * (1024 if unit == "Gi" else 1)


def readme_line(containing: str) -> str:
    (line,) = [ln.strip() for ln in (DEPLOY / "README.md").read_text(encoding="utf-8").splitlines() if containing in ln]
    return line


# -- users -------------------------------------------------------------------------------------------

def test_users_are_added_with_the_documented_command_into_the_search_pods_writable_home(tmp_path, monkeypatch):
    """config.yaml (a read-only ConfigMap) keeps the users in users_file, on the search pod's home volume; the README's
    `kubectl exec ... -- local-rag users add` run here as in that pod writes it, and the server's users see the key."""
    from rag_search.access import users
    from rag_search.cli.main import cli
    from rag_search.config import Paths

    env = manifest("ConfigMap", "local-rag-env")["data"]
    config = yaml.safe_load(example_config())
    assert config["users_file"].startswith(env["LOCAL_RAG_HOME"] + "/")
    mounts = {m["mountPath"]: m for m in search_container()["volumeMounts"]}
    home = mounts[env["LOCAL_RAG_HOME"]]
    assert not home.get("readOnly") and mounts["/etc/local-rag"]["readOnly"]
    (volume,) = [v for v in manifest("Deployment", "local-rag-search")["spec"]["template"]["spec"]["volumes"]
                 if v["name"] == home["name"]]
    claim = manifest("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]

    command = shlex.split(readme_line("local-rag users add"))
    assert command[:4] == ["kubectl", "exec", "deploy/local-rag-search", "--"]
    pod_home = tmp_path / "var-lib-local-rag"  # the pod's paths, here
    pod_home.mkdir()
    text = example_config().replace(env["LOCAL_RAG_HOME"], str(pod_home))
    (tmp_path / "config.yaml").write_text(text)
    monkeypatch.setenv("LOCAL_RAG_HOME", str(pod_home))
    monkeypatch.setenv("LOCAL_RAG_CONFIG", str(tmp_path / "config.yaml"))
    args = [a.replace("NAME", "alice") for a in command[5:]]
    out = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    key = out.stdout.strip()
    assert users.directory(Paths.from_env()).find(key).name == "alice"
    assert (pod_home / "users.yaml").exists() and (tmp_path / "config.yaml").read_text() == text


# -- the Ingress ----------------------------------------------------------------------------------

def test_the_ingress_reaches_the_search_server_by_a_name_it_answers_to():
    from rag_search.mcp.http import Allowed

    ingress, service = manifest("Ingress", "local-rag-search"), manifest("Service", "local-rag-search")
    (rule,) = ingress["spec"]["rules"]
    (tls,) = ingress["spec"]["tls"]
    (path,) = rule["http"]["paths"]
    backend = path["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
    assert rule["host"] == SEARCH_HOST and tls["hosts"] == [SEARCH_HOST]
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/backend-protocol"] == "HTTPS"

    args = search_container()["args"]
    hosts, origins = flag_values(args, "--allow-host"), flag_values(args, "--allow-origin")
    allowed = Allowed.for_server("0.0.0.0", 8765, hosts, origins, tls=True)
    assert allowed.host_ok(SEARCH_HOST) and allowed.host_ok(f"{service['metadata']['name']}:8765")
    assert allowed.origin_ok(f"https://{SEARCH_HOST}") and not allowed.host_ok("evil.example")


# -- the sources volume ---------------------------------------------------------------------------

def sources_mounts(volumes: list[dict], mounts: list[dict]) -> list[tuple[dict, dict]]:
    named = {v["name"]: v for v in volumes
             if v.get("persistentVolumeClaim", {}).get("claimName") == "local-rag-sources"}
    return [(named[m["name"]], m) for m in mounts if m["name"] in named]


def test_the_sources_are_read_only_in_every_local_rag_pod_and_written_only_by_the_loader():
    assert manifest("PersistentVolumeClaim", "local-rag-sources")["spec"]["accessModes"] == ["ReadWriteMany"]
    search = manifest("Deployment", "local-rag-search")["spec"]["template"]["spec"]
    location = code_location()
    for volumes, mounts in [(search["volumes"], search["containers"][0]["volumeMounts"]),
                            (location["volumes"], location["volumeMounts"])]:  # the code server and run pods
        [(volume, mount)] = sources_mounts(volumes, mounts)
        assert volume["persistentVolumeClaim"]["readOnly"] and mount["readOnly"] and mount["mountPath"] == "/data"
    loader = manifest("Pod", "local-rag-sources-loader")
    [(volume, mount)] = sources_mounts(loader["spec"]["volumes"], containers(loader)[0]["volumeMounts"])
    assert not volume["persistentVolumeClaim"].get("readOnly") and not mount.get("readOnly")
    assert mount["mountPath"] == "/data"
    config = yaml.safe_load(example_config())
    assert all(p.startswith("/data/") for c in config["collections"].values() for s in c["sources"] for p in s["paths"])
    filling = readme_line("| kubectl exec -i local-rag-sources-loader")
    assert filling.startswith("tar -C") and filling.endswith("tar -C /data/notes -xf -")


# -- Ollama, images, git --------------------------------------------------------------------------

def test_ollama_is_pinned_and_keeps_its_model_on_a_volume_of_its_own():
    ollama = manifest("StatefulSet", "ollama")
    (container,) = containers(ollama)
    assert re.fullmatch(r"ollama/ollama:\d+\.\d+\.\d+", container["image"]), container["image"]
    (template,) = ollama["spec"]["volumeClaimTemplates"]
    (mount,) = container["volumeMounts"]
    assert mount["name"] == template["metadata"]["name"] and mount["mountPath"] == "/root/.ollama"
    script = container["command"][-1]
    assert "ollama show bge-m3 >/dev/null 2>&1 || ollama pull bge-m3" in script  # pulled only when missing


def test_images_name_no_registry_host():
    images = [c["image"] for d in manifests() if d["kind"] in ("Deployment", "StatefulSet", "Pod")
              for c in containers(d)] + [f"{code_location()['image']['repository']}:x"]
    for image in images:
        first = image.split("/")[0]
        assert first == "REGISTRY" or ("." not in first and ":" not in first and "/" in image), image


def test_the_image_has_git_for_code_sources():
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    (install,) = [ln for ln in dockerfile.splitlines() if "apt-get install" in ln]
    assert " git " in f" {install} ".replace("&&", " ")
    assert '"git"' in (ROOT / "rag_pipelines" / "sources" / "gitcli.py").read_text(encoding="utf-8")


# -- resources ------------------------------------------------------------------------------------

def test_every_container_is_sized_from_the_measured_peaks():
    for doc in manifests():
        if doc["kind"] in ("Deployment", "StatefulSet", "Pod"):
            for c in containers(doc):
                r = c["resources"]
                assert {"cpu", "memory"} <= set(r["requests"]) and "memory" in r["limits"], doc["metadata"]["name"]
    run = code_location()["resources"]  # the code server's, and every run pod's (includeConfigInLaunchedRuns)
    assert mebibytes(run["requests"]["memory"]) >= MEASURED_MB["ocr run"]
    assert mebibytes(run["limits"]["memory"]) >= 1.5 * (MEASURED_MB["ocr run"] + MEASURED_MB["bundled run"])
    search = search_container()["resources"]
    assert mebibytes(search["requests"]["memory"]) >= 2 * MEASURED_MB["search"]


# -- the run pod as dagster-k8s renders it --------------------------------------------------------

@pytest.fixture
def run_launcher(tmp_path):
    """dagster-k8s's K8sRunLauncher with the chart's config, its client configured from a kubeconfig that names a
    server nobody serves (it never connects: rendering a Job calls no API)."""
    from dagster_k8s import K8sRunLauncher

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
        "users": [{"name": "none", "user": {"token": "unused"}}]}))
    config = {**run_launcher_config(), "load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
    return K8sRunLauncher(**config)


def test_the_run_pod_dagster_k8s_renders_validates_against_kubernetes(run_launcher):
    import kubernetes
    import kubernetes_validate
    from dagster_k8s.job import construct_dagster_k8s_job

    context = location_container_context()
    image = f"{code_location()['image']['repository']}:{code_location()['image']['tag']}"
    job = construct_dagster_k8s_job(
        context.get_k8s_job_config(job_image=image, run_launcher=run_launcher),
        args=["dagster", "api", "execute_run", "{}"], job_name="dagster-run-0f1e2d3c", pod_name="dagster-run-0f1e2d3c",
        component="run_worker", user_defined_k8s_config=context.run_k8s_config,
        labels={"dagster/job": "notes_index", "dagster/code-location": "rag"})
    doc = kubernetes.client.ApiClient().sanitize_for_serialization(job)
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    pod = doc["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == code_location()["resources"]
    assert {"name": "sources", "mountPath": "/data", "readOnly": True} in container["volumeMounts"]
    assert any(e["name"] == "PGPASSWORD" for e in container["env"]) and doc["metadata"]["labels"]["dagster/job"]


# -- the chart's pools and run monitoring, as Dagster reads them -----------------------------------

def test_the_chart_holds_each_collection_to_one_writer_and_monitors_run_pods(tmp_path):
    import dagster as dg
    from dagster._core.instance.config import PoolGranularity

    from rag_pipelines.wiring.instance import render
    from rag_search.config import load_settings

    chart = values()
    pools = {snake(k): v for k, v in chart["concurrency"]["pools"].items()}
    (tmp_path / "config.yaml").write_text(example_config())
    ours = yaml.safe_load(render(load_settings(tmp_path / "config.yaml").dagster))["concurrency"]["pools"]
    assert pools == ours
    monitoring = {snake(k): v for k, v in chart["dagsterDaemon"]["runMonitoring"].items()}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"concurrency": {"pools": pools},
                                                           "run_monitoring": monitoring,
                                                           "telemetry": {"enabled": False}}))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        pool = instance.get_concurrency_config().pool_config
        assert (pool.pool_granularity, pool.default_pool_limit) == (PoolGranularity.OP, 1)
        assert instance.run_monitoring_enabled and instance.run_monitoring_settings["free_slots_after_run_end_seconds"]
