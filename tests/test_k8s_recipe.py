"""The Kubernetes recipe in deploy/k8s/, checked as far as it can be without a cluster.

The Helm values against the Dagster chart's own schema, the run launcher's and code location's config against
dagster-k8s's, config.yaml through local-rag's own loaders, the manifests against Kubernetes' schemas, and the
image's command serving the code location.

The chart files in tests/fixtures/dagster_chart/ come from github.com/dagster-io/dagster (Apache-2.0),
helm/dagster/values.schema.json and helm/dagster/values.yaml at commit 437f92d953812a3efdf5a464ba196eb3fcd9a777
(master from before the chart's `ui:` values: the newest consistent pair of the two files that could be read
here; the 1.13.27 chart itself could not be fetched). The schema is the file as it is (re-serialised with the same
4-space layout: 130,765 characters, as the original); of values.yaml only the data is kept, without its comments. The
schema's Kubernetes `$ref`s point at a remote v1.19.0 _definitions.json; they are resolved against the
definitions kubernetes-validate ships in its wheel, so nothing is fetched.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "k8s"
CHART = Path(__file__).parent / "fixtures" / "dagster_chart"
K8S_VERSION = "1.25.0"  # the oldest Kubernetes definitions kubernetes-validate ships (the chart's refs name 1.19.0)
RELEASE = {"namespace": "local-rag", "fullname": "dagster"}  # what `helm install dagster` in that namespace names
MANIFESTS = ("configmap.yaml", "ollama.yaml", "search.yaml", "ingress.yaml", "sources.yaml", "sources-loader.yaml",
             "secrets.example.yaml")


# -- the files ----------------------------------------------------------------------------------

def values() -> dict:
    return yaml.safe_load((DEPLOY / "dagster-values.yaml").read_text(encoding="utf-8"))


def manifests() -> list[dict]:
    docs = []
    for name in MANIFESTS:
        docs += [d for d in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if d]
    return docs


def manifest(kind: str, name: str) -> dict:
    found = [d for d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"deploy/k8s has {len(found)} {kind} named {name}"
    return found[0]


def code_location() -> dict:
    (deployment,) = values()["dagster-user-deployments"]["deployments"]
    return deployment


def mount_path(volume: str) -> str:
    (mount,) = [m for m in code_location()["volumeMounts"] if m["name"] == volume]
    return mount["mountPath"]


def merged_values() -> dict:
    """The chart's defaults with the recipe's values over them, as Helm merges them (maps key by key, the rest
    replaced) before it validates against values.schema.json."""
    def merge(base, over):
        if isinstance(base, dict) and isinstance(over, dict):
            return {**base, **{k: merge(base.get(k), v) for k, v in over.items()}}
        return copy.deepcopy(over)

    return merge(yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8")), values())


# -- the Helm values against the chart's schema -------------------------------------------------

def chart_errors(candidate: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in chart_validator().iter_errors(candidate)]


@functools.cache
def chart_validator():
    import jsonschema
    import kubernetes_validate
    from referencing import Registry, Resource

    definitions = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{K8S_VERSION}-local"
    k8s = json.loads((definitions / "_definitions.json").read_text(encoding="utf-8"))
    # the chart refers to `#/definitions/...` of the file; the shipped one keeps them under `$defs`
    remote = Resource.from_contents({**k8s, "definitions": k8s["$defs"]})
    registry = Resource.from_contents(k8s) @ Registry(retrieve=lambda uri: remote)
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_the_helm_values_validate_against_the_dagster_charts_schema():
    assert chart_errors(merged_values()) == []


@pytest.mark.parametrize("path, bad", [
    (("runLauncher", "config", "k8sRunLauncher", "imagePulPolicy"), "Always"),  # a misspelt key
    (("dagster-user-deployments", "deployments", 0, "volumes", 0, "configMap"), {"name": 3}),  # a Kubernetes type
    (("concurrency", "runs", "tagConcurrencyLimits", 0, "limit"), "one"),
])
def test_the_schema_check_rejects_what_helm_would(path, bad):
    candidate = merged_values()
    target = candidate
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = bad
    assert chart_errors(candidate), f"{'.'.join(map(str, path))} = {bad!r} passed the chart's schema"


# -- the run launcher and the code location against dagster-k8s ---------------------------------

def run_launcher_config() -> dict:
    """The run_launcher config the chart writes into dagster.yaml (its _run-launcher.tpl,
    "dagsterYaml.runLauncher.k8s"): the keys it maps from runLauncher.config.k8sRunLauncher, with the release's
    names."""
    merged = merged_values()
    k8s = merged["runLauncher"]["config"]["k8sRunLauncher"]
    run_k8s = {snake(k): v for k, v in (k8s.get("runK8sConfig") or {}).items() if v}
    config = {
        "load_incluster_config": k8s["loadInclusterConfig"],
        "job_namespace": k8s.get("jobNamespace") or RELEASE["namespace"],
        "image_pull_policy": k8s["imagePullPolicy"],
        "service_account_name": RELEASE["fullname"],
        "dagster_home": merged["global"]["dagsterHome"],
        "instance_config_map": f"{RELEASE['fullname']}-instance",
        "postgres_password_secret": merged["global"]["postgresqlSecretName"],
        "env_config_maps": [c["name"] for c in k8s["envConfigMaps"]],
        "env_secrets": [s["name"] for s in k8s["envSecrets"]],
        "env_vars": k8s["envVars"], "volume_mounts": k8s["volumeMounts"], "volumes": k8s["volumes"],
        "run_k8s_config": run_k8s,
    }
    return {k: v for k, v in config.items() if v not in ([], {}, None)}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def test_the_run_launcher_config_validates_against_dagster_k8s():
    from dagster._config.validate import process_config
    from dagster_k8s import K8sRunLauncher
    from dagster_k8s.job import UserDefinedDagsterK8sConfig

    config = run_launcher_config()
    result = process_config(K8sRunLauncher.config_type(), config)
    assert result.success, [e.message for e in result.errors or []]
    job_spec = UserDefinedDagsterK8sConfig.from_dict(config["run_k8s_config"]).job_spec_config
    assert job_spec["ttl_seconds_after_finished"] == 86400  # dagster-k8s read the chart's camelCase key


def test_each_run_pod_gets_the_code_locations_config_volumes_and_password():
    """The container context the chart gives the code server (its dagsterUserDeployments.k8sContainerContext), which
    dagster-k8s applies to every run's pod: parsed and converted by dagster-k8s's own code (it rejects unknown
    Kubernetes fields), no client and no cluster involved."""
    context = location_container_context()
    pod, container = context.run_k8s_config.pod_spec_config, context.run_k8s_config.container_config
    assert {v["name"] for v in pod["volumes"]} == {"config", "home", "sources"}
    assert {m["mount_path"] for m in container["volume_mounts"]} == {"/etc/local-rag", "/var/lib/local-rag", "/data"}
    assert {"name": "PGPASSWORD", "value_from": {"secret_key_ref": {"name": "local-rag-postgres",
                                                                    "key": "postgresql-password"}}} in container["env"]
    assert {"config_map_ref": {"name": "local-rag-env"}} in container["env_from"]


def location_container_context():
    """The container context the chart gives the code server (its dagsterUserDeployments.k8sContainerContext), which
    dagster-k8s applies to every run's pod, parsed by dagster-k8s's own code."""
    from dagster_k8s.container_context import K8sContainerContext

    location = code_location()
    return K8sContainerContext.create_from_config({"k8s": {
        "image_pull_policy": location["image"]["pullPolicy"],
        "env_config_maps": [f"{RELEASE['fullname']}-{location['name']}-user-env",
                            *(c["name"] for c in location["envConfigMaps"])],
        "volume_mounts": location["volumeMounts"], "volumes": location["volumes"],
        "resources": location["resources"], "namespace": RELEASE["namespace"], "env": location["env"],
        "service_account_name": f"{RELEASE['fullname']}-user-deployments",
        "run_k8s_config": {"pod_spec_config": {"automount_service_account_token": True}},
    }})


# -- the queue: local-rag's limits --------------------------------------------------------------

def test_the_queue_has_the_limits_local_rag_writes(tmp_path):
    """The chart's `concurrency:` section (its _concurrency.tpl) equals the one local-rag writes into its own
    dagster.yaml for the same settings, and Dagster accepts it as an instance's config."""
    import dagster as dg

    from rag_pipelines.wiring.instance import render

    runs = values()["concurrency"]["runs"]
    settings = example_settings(tmp_path)
    ours = yaml.safe_load(render(settings.dagster))["concurrency"]["runs"]
    assert runs["tagConcurrencyLimits"] == ours["tag_concurrency_limits"]
    assert runs["maxConcurrentRuns"] == ours["max_concurrent_runs"] == settings.dagster.runs
    queued = merged_values()["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert not queued["tagConcurrencyLimits"] and queued["maxConcurrentRuns"] is None  # the chart fails on both

    chart = {"max_concurrent_runs": runs["maxConcurrentRuns"], "tag_concurrency_limits": runs["tagConcurrencyLimits"]}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"concurrency": {"runs": chart},
                                                           "telemetry": {"enabled": False}}), encoding="utf-8")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 4
        assert [(t["key"], t["limit"]) for t in queue.tag_concurrency_limits] == [("local_rag/collection", 1)]


# -- config.yaml --------------------------------------------------------------------------------

def example_config() -> str:
    return manifest("ConfigMap", "local-rag-config")["data"]["config.yaml"]


def example_settings(tmp_path: Path):
    from rag_search.config import load_settings

    path = tmp_path / "config.yaml"
    path.write_text(example_config(), encoding="utf-8")
    return load_settings(path)


def test_the_example_config_loads_with_local_rags_loaders(tmp_path):
    from rag_pipelines.config import load_collections
    from rag_search.config import Paths

    env = manifest("ConfigMap", "local-rag-env")["data"]
    (tmp_path / "config.yaml").write_text(example_config(), encoding="utf-8")
    paths = Paths.from_env({**env, "LOCAL_RAG_HOME": str(tmp_path), "LOCAL_RAG_CONFIG": str(tmp_path / "config.yaml")})
    settings = example_settings(tmp_path)
    assert settings.store.startswith("postgresql://") and settings.dagster.on_postgres
    assert settings.embedder.provider == "ollama"
    (notes,) = load_collections(paths, settings).values()
    assert [str(p) for p in notes.sources[0].paths] == ["/data/notes"]
    for url in (settings.store, settings.dagster.storage):
        assert urlsplit(url).password is None, f"{url}: the password belongs in the Secret"


def test_config_and_manifests_name_the_same_things(tmp_path):
    settings = example_settings(tmp_path)
    env = manifest("ConfigMap", "local-rag-env")["data"]
    assert env["LOCAL_RAG_CONFIG"] == f"{mount_path('config')}/config.yaml"
    assert env["LOCAL_RAG_HOME"] == mount_path("home")
    sources = mount_path("sources")
    assert all(str(p).startswith(sources + "/") for p in settings.collections["notes"]["sources"][0]["paths"])

    ollama, service = manifest("StatefulSet", "ollama"), manifest("Service", "ollama")
    (port,) = service["spec"]["ports"]
    assert env["OLLAMA_HOST"] == f"http://{service['metadata']['name']}:{port['port']}"
    (container,) = ollama["spec"]["template"]["spec"]["containers"]
    assert f"ollama pull {settings.embedder.model}" in container["command"][-1]
    assert container["readinessProbe"]["exec"]["command"] == ["ollama", "show", settings.embedder.model]
    assert settings.dagster.embedder_slots == ollama["spec"]["replicas"]

    pg, dagster_db = values()["postgresql"], urlsplit(settings.dagster.storage)
    assert (dagster_db.hostname, dagster_db.port, dagster_db.username, dagster_db.path) == \
        (pg["postgresqlHost"], pg["service"]["port"], pg["postgresqlUsername"], f"/{pg['postgresqlDatabase']}")
    assert values()["global"]["postgresqlSecretName"] == manifest("Secret", "local-rag-postgres")["metadata"]["name"]


@pytest.mark.postgres
def test_urls_without_a_password_connect_with_pgpassword(postgres_url, tmp_path, monkeypatch):
    """config.yaml's URLs hold no password; the pods get PGPASSWORD from the Secret. Against a real server that asks
    for a password: local-rag's store connection (psycopg) and its Dagster instance check (psycopg2, as
    dagster-postgres) connect with it, and are refused without it."""
    from rag_pipelines.wiring.instance import check_postgres
    from rag_search.errors import ConfigError, StoreError
    from rag_search.store.pg.connection import PgConnection

    parts = urlsplit(postgres_url)
    bare = urlunsplit(parts._replace(netloc=f"{parts.username}@{parts.hostname}:{parts.port}"))
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(StoreError):
        PgConnection.connect(bare)
    with pytest.raises(ConfigError):
        check_postgres(bare)
    monkeypatch.setenv("PGPASSWORD", parts.password)
    PgConnection.connect(bare).raw.close()
    check_postgres(bare)


# -- the manifests against Kubernetes' schemas --------------------------------------------------

@pytest.mark.parametrize("doc", manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_manifest_validates_against_kubernetes(doc):
    import kubernetes_validate

    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # strict: an unknown field is an error


def test_the_search_server_runs_the_image_with_the_shared_config():
    (container,) = manifest("Deployment", "local-rag-search")["spec"]["template"]["spec"]["containers"]
    image = code_location()["image"]
    assert container["image"] == f"{image['repository']}:{image['tag']}"
    assert container["args"][:3] == ["local-rag", "serve", "--http"] and "--tls" in container["args"]
    assert {"configMapRef": {"name": "local-rag-env"}} in container["envFrom"]
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {mount_path("config"), mount_path("home")}


# -- the image: its pins and its command --------------------------------------------------------

def dockerfile_cmd() -> list[str]:
    (line,) = [ln for ln in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines() if ln.startswith("CMD ")]
    return json.loads(line[4:])


def grpc_command(host: str, port: int) -> list[str]:
    """What the chart runs in the code server's container (its deployment-user.yaml)."""
    return ["dagster", "api", "grpc", "-h", host, "-p", str(port), *code_location()["dagsterApiGrpcArgs"]]


def test_the_image_pins_dagster_k8s_to_the_installed_dagster():
    import tomllib

    import dagster
    import dagster_k8s
    import dagster_postgres

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert extras["k8s"] == [f"dagster-k8s=={dagster_k8s.__version__}"]
    assert dagster_k8s.__version__ == dagster_postgres.__version__  # released together: 0.29.N with 1.13.N
    assert dagster_k8s.__version__.split(".")[2] == dagster.__version__.split(".")[2]
    assert 'pip install --no-cache-dir ".[postgres,k8s]"' in (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert dockerfile_cmd() == grpc_command("0.0.0.0", code_location()["port"])


def adapted_home(tmp_path: Path) -> dict[str, str]:
    """The pod's environment on this machine: the example config with its folder here, rag.db and a SQLite
    instance instead of PostgreSQL (no server here), and an Ollama address nothing listens on (never called)."""
    config = yaml.safe_load(example_config())
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "hello.md").write_text("# Hello\n\nA note on the shared volume.\n", encoding="utf-8")
    del config["store"], config["dagster"]["storage"]
    config["collections"]["notes"]["sources"][0]["paths"] = [str(notes)]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (tmp_path / "dagster").mkdir()
    (tmp_path / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return {**os.environ, "LOCAL_RAG_HOME": str(tmp_path / "home"), "LOCAL_RAG_CONFIG": str(tmp_path / "config.yaml"),
            "DAGSTER_HOME": str(tmp_path / "dagster"), "OLLAMA_HOST": "http://127.0.0.1:9"}


def test_the_images_command_serves_the_code_location(tmp_path):
    """The chart's command for the code server (grpc_command: its args from the values) serves the collection."""
    import dagster as dg
    from code_server import code_server
    from dagster._core.remote_origin import GrpcServerCodeLocationOrigin

    with code_server(adapted_home(tmp_path), tmp_path / "server.log", code_location()["dagsterApiGrpcArgs"]) as port:
        origin = GrpcServerCodeLocationOrigin(host="127.0.0.1", port=port, location_name="rag")
        with dg.DagsterInstance.ephemeral() as instance, origin.create_location(instance) as location:
            (repo,) = location.get_repositories().values()
            assert {"notes_index", "notes_sync"} <= {j.name for j in repo.get_all_jobs()}
            assert [s.name for s in repo.get_sensors()] == ["notes_sensor"]
