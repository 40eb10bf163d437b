"""The deployment files describe the processes the code has, and the Grafana dashboard plots
metrics that /metrics really exports (there is no Docker engine or cluster here to run them).

The Kubernetes manifests in deploy/kubernetes are validated offline against the Kubernetes API
schemas (kubernetes-validate), and read the way a reviewer would: the commands exist, the synthesis
worker owns a GPU and is ready only with its model, beat runs once, the autoscaler scales the web."""

from __future__ import annotations

import json
import re
import socket
import time
from collections import defaultdict

import httpx
import kubernetes_validate
import pytest
import redis
import yaml
from celery.app.utils import find_app
from django.conf import settings
from django.core.management import get_commands
from django.urls import resolve
from uvicorn.importer import import_from_string

from synthesis.service import workers
from synthesis.service.metrics import SynthesisCollector
from tests.stack import ROOT
from tts_saas.views import health

K8S = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes these manifests target, and the newest the validator knows.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
SECRET_NAME = "tts-saas-secrets"
# Environment variables the manifests set for libraries, not for this project's settings.
THIRD_PARTY_ENV = {"HOME", "NUMBA_CACHE_DIR"}
# Set in the worker manifest for the batching worker of the same issue; drop from here when read.
PENDING_ENV: set[str] = set()


def kustomization() -> dict:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def documents() -> list[tuple[str, dict]]:
    return [
        (name, doc)
        for name in kustomization()["resources"]
        for doc in yaml.safe_load_all((K8S / name).read_text())
        if doc
    ]


def resource(kind: str, name: str) -> dict:
    found = [d for _, d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def workloads() -> list[dict]:
    return [d for _, d in documents() if d["kind"] in ("Deployment", "Job")]


def pod(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def containers(workload: dict) -> list[dict]:
    return pod(workload).get("initContainers", []) + pod(workload)["containers"]


def env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def secret_example() -> dict[str, str]:
    lines = (K8S / "secret.example.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def consumed_queues(workload: dict) -> set[str]:
    return {option(c["command"], "-Q") for c in containers(workload) if "-Q" in c.get("command", [])}


def runs_beat(command: list[str]) -> bool:
    return command[:1] == ["celery"] and ("beat" in command or "--beat" in command or "-B" in command)


# --- docker compose -------------------------------------------------------------------------


def test_compose_runs_migrations_web_and_both_kinds_of_worker():
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "light"} <= set(services)
    assert services["migrate"]["command"][:3] == ["python", "manage.py", "migrate"]
    worker, light = services["worker"]["command"], services["light"]["command"]
    assert worker[worker.index("-Q") + 1] == settings.CELERY_TASK_ROUTES["synthesis.tasks.synthesize_job"]["queue"]
    assert "-c" not in worker  # its pool is TTS_MAX_BATCH threads around one model, set by the worker
    assert light[light.index("-Q") + 1] == "default" and "--beat" in light
    assert services["worker"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "tts_saas.asgi:application" in dockerfile and "--lifespan" in dockerfile


# --- Grafana --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_grafana_dashboard_plots_metrics_that_exist(live_stack, owner):
    with live_stack.client(owner.key) as client:
        client.post("/audio/speech", json={"input": "Graph me.", "seed": 1, "response_format": "pcm"})
    exported = httpx.get(f"{live_stack.base_url}/metrics").text
    exported += httpx.get(f"http://127.0.0.1:{live_stack.worker_metrics_port}/metrics").text
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "tts_saas.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = {re.sub(r"_(bucket|total|sum|count)$", "", n) for e in expressions for n in re.findall(r"tts_[a-z_]+", e)}
    assert names
    for name in names:
        assert re.search(rf"^# TYPE {name}(_total)? ", exported, re.M), f"{name} is plotted but not exported"


def test_the_grafana_dashboard_counts_shared_figures_once_across_replicas():
    """The cache, queue and worker figures are read from Redis by every web replica, so each
    scraped replica repeats them: a panel must aggregate them (max, or a ratio of sums), and a
    ratio must not match on labels one side has summed away (it would plot nothing)."""
    shared = {family.name for family in SynthesisCollector().describe()}
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "tts_saas.json").read_text())
    checked = 0
    for expr in (t["expr"] for p in dashboard["panels"] for t in p["targets"]):
        if not shared & {re.sub(r"_(bucket|total)$", "", n) for n in re.findall(r"tts_[a-z_]+", expr)}:
            continue
        checked += 1
        assert "ignoring(" not in expr and "on(" not in expr, expr
        for term in expr.split(" / "):
            assert re.match(r"^(max|sum|min|avg)\b", term.strip()), f"not aggregated across replicas: {expr}"
    assert checked, "no panel plots a figure read from Redis"


# --- Kubernetes: schema ---------------------------------------------------------------------


def test_the_kustomization_applies_every_manifest_in_the_folder():
    assert set(kustomization()["resources"]) == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(
    ("name", "doc"), [pytest.param(n, d, id=f"{n}:{d['kind']}/{d['metadata']['name']}") for n, d in documents()]
)
def test_every_manifest_validates_against_the_kubernetes_schema(name, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_the_schema_validation_catches_a_misspelt_field():
    worker = resource("Deployment", "tts-saas-worker")
    pod(worker)["containers"][0]["resource"] = pod(worker)["containers"][0].pop("resources")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, K8S_VERSIONS[0], strict=True)


# --- Kubernetes: processes ------------------------------------------------------------------


def check_command(command: list[str], monkeypatch) -> None:
    program, args = command[0], command[1:]
    if program == "sh":
        assert args[0] == "-c"
        managed = re.findall(r"\bpython manage\.py (\w+)", args[1])
        assert managed, f"a shell command that runs no manage.py command: {args[1]}"
        assert set(managed) <= set(get_commands()), managed
    elif program == "python" and args[0] == "manage.py":
        assert args[1] in get_commands(), f"no management command {args[1]!r}"
    elif program == "python" and args[0] == "-c":
        compile(args[1], "python -c", "exec")
    elif program == "celery":
        assert find_app(option(command, "-A")).main == "tts_saas"
        subcommand = next(a for a in args[2:] if not a.startswith("-"))
        assert subcommand in {"worker", "beat"}
        if subcommand == "worker":
            routed = {r["queue"] for r in settings.CELERY_TASK_ROUTES.values()}
            assert option(command, "-Q") in routed | {settings.CELERY_TASK_DEFAULT_QUEUE}
    elif program == "uvicorn":
        application = import_from_string(args[0])
        assert settings.ASGI_APPLICATION == args[0].replace(":", ".")
        assert callable(application)
    else:
        pytest.fail(f"unknown program {program!r} in {command}")


def test_every_container_and_probe_runs_a_process_that_exists(monkeypatch):
    commands = []
    for workload in workloads():
        for container in containers(workload):
            commands.append(container["command"])
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                if "exec" in container.get(probe, {}):
                    commands.append(container[probe]["exec"]["command"])
    assert len(commands) >= 6
    for command in commands:
        check_command(command, monkeypatch)


def test_every_queue_the_code_sends_to_has_a_worker():
    sent = {r["queue"] for r in settings.CELERY_TASK_ROUTES.values()} | {settings.CELERY_TASK_DEFAULT_QUEUE}
    sent |= {e["options"]["queue"] for e in settings.CELERY_BEAT_SCHEDULE.values() if "queue" in e.get("options", {})}
    consumed = set().union(*(consumed_queues(w) for w in workloads()))
    assert sent <= consumed


def test_the_synthesis_worker_owns_one_gpu_and_one_model():
    worker = resource("Deployment", "tts-saas-worker")
    (container,) = pod(worker)["containers"]
    command = container["command"]
    assert option(command, "-Q") == settings.CELERY_TASK_ROUTES["synthesis.tasks.synthesize_job"]["queue"]
    assert "-c" not in command  # one process, one model, per GPU; its threads are TTS_MAX_BATCH
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    assert command == compose["services"]["worker"]["command"]
    limits, requests = container["resources"]["limits"], container["resources"].get("requests", {})
    assert str(limits["nvidia.com/gpu"]) == "1"
    assert str(requests.get("nvidia.com/gpu", 1)) == "1"  # extended resources: requests must equal limits
    assert env(container)["TTS_DEVICE"].startswith("cuda")
    assert int(env(container)["TTS_MAX_BATCH"]) >= 1
    assert container["readinessProbe"]["exec"]["command"][:2] == ["python", "-c"]
    # The GPU is the scarce thing: the other workloads must not ask for one.
    for other in workloads():
        if other["metadata"]["name"] != worker["metadata"]["name"]:
            assert all("nvidia.com/gpu" not in str(c.get("resources")) for c in containers(other))


class FakeRedis:
    """Just what synthesis.workers.register writes and the readiness probe reads."""

    def __init__(self):
        self.zsets: dict[str, dict[bytes, float]] = defaultdict(dict)
        self.hashes: dict[str, dict[bytes, bytes]] = defaultdict(dict)

    def pipeline(self):
        return self

    def execute(self):
        return []

    def zadd(self, key, mapping):
        self.zsets[key].update({str(m).encode(): s for m, s in mapping.items()})

    def hset(self, key, field, value):
        self.hashes[key][str(field).encode()] = value.encode()

    def zrangebyscore(self, key, low, high):
        assert high == "+inf"
        return [m for m, s in self.zsets[key].items() if s >= float(low)]

    def hget(self, key, field):
        return self.hashes[key].get(field if isinstance(field, bytes) else field.encode())


def test_the_worker_is_ready_only_once_its_own_model_is_loaded(monkeypatch):
    """Runs the readiness probe's code against what the worker's registration writes."""
    container = pod(resource("Deployment", "tts-saas-worker"))["containers"][0]
    code = compile(container["readinessProbe"]["exec"]["command"][2], "readinessProbe", "exec")
    fake = FakeRedis()
    monkeypatch.setattr(workers, "get_redis", lambda: fake)
    monkeypatch.setattr(redis.Redis, "from_url", lambda *args, **kwargs: fake)
    monkeypatch.setenv("REDIS_URL", "redis://redis.invalid:6379/0")

    def ready() -> bool:
        with pytest.raises(SystemExit) as exit:
            exec(code, {})
        return exit.value.code == 0

    assert not ready()  # nothing registered yet: the model is loading
    host, later = socket.gethostname(), time.time() + 60
    for other in ("elsewhere:1", f"{host}-other:1"):  # other pods' ready workers do not count
        fake.zadd(workers.REGISTRY, {other: later})
        fake.hset(workers.INFO, other, json.dumps({"status": "ready", "model_version": "v", "error": ""}))
    assert not ready()
    workers.register("unavailable", error="checksum mismatch")
    assert not ready()
    workers.register("ready", model_version="v1")
    assert ready()
    fake.zadd(workers.REGISTRY, {workers.worker_name(): time.time() - 1})  # heartbeat stopped
    assert not ready()


def test_beat_runs_exactly_once():
    beat = resource("Deployment", "tts-saas-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"  # never two side by side during a rollout
    running_beat = [
        (w["metadata"]["name"], c["name"]) for w in workloads() for c in containers(w) if runs_beat(c["command"])
    ]
    assert running_beat == [("tts-saas-beat", "beat")]


def test_the_web_runs_the_image_command_and_is_probed_on_a_real_health_endpoint():
    web = resource("Deployment", "tts-saas-web")
    (container,) = pod(web)["containers"]
    cmd_line = next(
        line for line in (ROOT / "deploy" / "Dockerfile").read_text().splitlines() if line.startswith("CMD")
    )
    assert container["command"] == json.loads(cmd_line.removeprefix("CMD"))
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert str(port_names["http"]) == option(container["command"], "--port")
    allowed = resource("ConfigMap", "tts-saas-config")["data"]["ALLOWED_HOSTS"].split(",")
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert resolve(get["path"]).func is health
        assert get["port"] in port_names
        hosts = [h["value"] for h in get.get("httpHeaders", []) if h["name"].lower() == "host"]
        assert hosts and hosts[0] in allowed, "Django answers 400 to a probe whose Host is not allowed"
    assert "cpu" in container["resources"]["requests"]  # what the HPA's utilisation is measured against
    service = resource("Service", "tts-saas-web")
    assert service["spec"]["selector"].items() <= web["spec"]["template"]["metadata"]["labels"].items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(port_names)


def test_the_autoscaler_scales_the_web_on_cpu():
    hpa = resource("HorizontalPodAutoscaler", "tts-saas-web")
    target = hpa["spec"]["scaleTargetRef"]
    web = resource("Deployment", target["name"])
    assert (target["kind"], target["apiVersion"]) == (web["kind"], web["apiVersion"])
    assert web["metadata"]["labels"]["app.kubernetes.io/component"] == "web"
    assert "replicas" not in web["spec"]  # the HPA owns the count; re-applying must not reset it
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu" and metric["resource"]["target"]["type"] == "Utilization"


# --- Kubernetes: configuration --------------------------------------------------------------


def test_pods_use_the_config_the_secret_and_volumes_that_are_defined():
    config_maps = {d["metadata"]["name"] for _, d in documents() if d["kind"] == "ConfigMap"}
    claims = {d["metadata"]["name"] for _, d in documents() if d["kind"] == "PersistentVolumeClaim"}
    for workload in workloads():
        spec = pod(workload)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in containers(workload):
            refs = container["envFrom"]
            assert {r["configMapRef"]["name"] for r in refs if "configMapRef" in r} <= config_maps
            assert [r["secretRef"]["name"] for r in refs if "secretRef" in r] == [SECRET_NAME]
            assert {m["name"] for m in container.get("volumeMounts", [])} <= set(volumes)
        assert {
            v["persistentVolumeClaim"]["claimName"] for v in volumes.values() if "persistentVolumeClaim" in v
        } <= claims
        if workload["kind"] == "Deployment":
            labels = workload["spec"]["template"]["metadata"]["labels"]
            assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items()
    guide = (K8S / "secret.example.env").read_text() + (ROOT / "docs" / "operating.md").read_text()
    assert f"create secret generic {SECRET_NAME}" in guide


def test_secrets_stay_out_of_the_configmap_and_every_setting_is_one_the_code_reads():
    secret = secret_example()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(secret)
    assert all("CHANGE-ME" in value or ".example." in value for value in secret.values()), "placeholders only"
    config = resource("ConfigMap", "tts-saas-config")["data"]
    assert not set(config) & (set(secret) | {"EMAIL_HOST_PASSWORD"})
    names = set(config) | set(secret)
    names |= {name for w in workloads() for c in containers(w) for name in env(c)}
    source = "".join(
        p.read_text()
        for package in ("tts_saas", "accounts", "billing", "synthesis", "dashboard", "inference")
        for p in (ROOT / package).rglob("*.py")
        if "migrations" not in p.parts
    )
    unread = {name for name in names - THIRD_PARTY_ENV if f'"{name}"' not in source}
    assert unread <= PENDING_ENV, f"set in deploy/kubernetes but read nowhere: {sorted(unread - PENDING_ENV)}"


def test_pods_run_as_non_root_without_privilege_escalation():
    for workload in workloads():
        context = pod(workload)["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] != 0
        for container in containers(workload):
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_operating_guide_explains_scale_out_with_metrics_that_exist():
    guide = (ROOT / "docs" / "operating.md").read_text()
    section = guide.split("## From one machine to many", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"kubectl (-n \S+ )?apply -k deploy/kubernetes", section)
    for word in ("TTS_MAX_BATCH", "nvidia.com/gpu", "device plugin", SECRET_NAME):
        assert word in section, word
    sources = [
        ROOT / "tts_saas" / "metrics.py",
        ROOT / "synthesis" / "metrics.py",
        ROOT / "synthesis" / "worker_metrics.py",
    ]
    defined = {n for p in sources for n in re.findall(r'"(tts_[a-z_]+)"', p.read_text())}
    exported = defined | {f"{n}_total" for n in defined} | {f"{n}_bucket" for n in defined}
    mentioned = {n for n in re.findall(r"\b(tts_[a-z_]+)", section) if not n.startswith("tts_saas")}
    assert mentioned, "the section names no metric to watch"
    assert mentioned <= exported, f"not exported: {sorted(mentioned - exported)}"


def test_the_manifests_name_the_image_compose_builds():
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    image = compose["x-app"]["image"]
    images = {c["image"] for w in workloads() for c in containers(w)}
    assert images == {image}
