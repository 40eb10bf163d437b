"""The deployment files describe the processes the code has, and the Grafana dashboard plots
metrics that /metrics really exports (there is no Docker engine or cluster here to run them).

The Kubernetes manifests in deploy/kubernetes are validated offline against the Kubernetes API
schemas (kubernetes-validate), and read the way a reviewer would: the commands exist, each engine
has its own synthesis worker that consumes that engine's queue alone, owns a GPU and is ready only
with its own model, beat runs once, the autoscaler scales the web. The image installs the engines
it is built for (deploy/Dockerfile's ENGINES), and Kokoro can run alone, with no ChatTTS."""

from __future__ import annotations

import json
import re
import runpy
import socket
import subprocess
import time
import uuid
from collections import defaultdict
from types import SimpleNamespace

import httpx
import kubernetes_validate
import numpy as np
import pytest
import redis
import yaml
from celery.app.utils import find_app
from django.conf import settings
from django.core.management import get_commands
from django.urls import resolve
from uvicorn.importer import import_from_string

from inference.registry import SPECS
from synthesis.service import workers
from synthesis.service.metrics import SynthesisCollector
from synthesis.worker.lifecycle import engine_of_queues
from tests.stack import ROOT
from tts_saas.views import health

K8S = ROOT / "deploy" / "kubernetes"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
COMPOSE = ROOT / "deploy" / "docker-compose.yml"
# The oldest Kubernetes these manifests target, and the newest the validator knows.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
SECRET_NAME = "tts-saas-secrets"
# Environment variables the manifests set for libraries, not for this project's settings.
THIRD_PARTY_ENV = {"HOME", "NUMBA_CACHE_DIR"}
# Set in the worker manifest for the batching worker of the same issue; drop from here when read.
PENDING_ENV: set[str] = set()
ENGINE_LABEL = "tts-saas/engine"


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


def manifest_text(kind: str, name: str) -> str:
    """The file holding that resource, comments included."""
    (file,) = [f for f, d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return (K8S / file).read_text()


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


def queues_of(command: list[str]) -> list[str]:
    """The queues a `celery worker` command consumes (-Q takes a comma-separated list)."""
    return option(command, "-Q").split(",") if "-Q" in command else []


def consumed_queues(workload: dict) -> set[str]:
    return {q for c in containers(workload) for q in queues_of(c.get("command", []))}


def engine_queues() -> dict[str, str]:
    """Each engine's queue, by queue: what synthesis.service.queue sends its jobs to."""
    return {spec.queue_name: name for name, spec in SPECS.items()}


def worker_deployment(engine: str) -> dict:
    return resource("Deployment", f"tts-saas-worker-{engine}")


def synthesis_workers() -> list[dict]:
    return [worker_deployment(engine) for engine in SPECS]


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def runs_beat(command: list[str]) -> bool:
    return command[:1] == ["celery"] and ("beat" in command or "--beat" in command or "-B" in command)


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (binary or decimal suffix, or none)."""
    number, suffix = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i?)?", str(quantity)).groups()
    scale = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "M": 10**6, "G": 10**9}
    return int(float(number) * scale[suffix])


def queues_the_code_sends_to(monkeypatch) -> set[str]:
    """Every queue a message is sent to, found by running the code's own senders for every engine
    (jobs, voice recordings, callbacks), plus the default queue, the beat schedule's options and
    any static route the settings may hold."""
    from synthesis.service import queue as job_queue  # noqa: PLC0415
    from voices import recordings  # noqa: PLC0415

    sent: list[str] = []

    def capture(name, object_id, *, request_id="", **options):
        sent.append(options.get("queue", settings.CELERY_TASK_DEFAULT_QUEUE))

    monkeypatch.setattr(job_queue, "send", capture)
    monkeypatch.setattr(recordings, "send", capture)
    monkeypatch.setattr(recordings, "get_redis", FakeRedis)
    for name, spec in SPECS.items():
        job_queue.enqueue_synthesis(uuid.uuid4(), engine=name, priority=0, expires=60.0, request_id="r")
        recordings.start_encoding(SimpleNamespace(id=uuid.uuid4()), spec, np.zeros(2400, dtype=np.float32))
    job_queue.enqueue_callback(uuid.uuid4())
    queues = set(sent) | {settings.CELERY_TASK_DEFAULT_QUEUE}
    queues |= {e["options"]["queue"] for e in settings.CELERY_BEAT_SCHEDULE.values() if "queue" in e.get("options", {})}
    queues |= {r["queue"] for r in getattr(settings, "CELERY_TASK_ROUTES", {}).values() if "queue" in r}
    return queues


# --- the image ------------------------------------------------------------------------------


def dockerfile_instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def requirement_names(path) -> set[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    return {re.split(r"[<>=!~\[;\s]", line, maxsplit=1)[0].lower() for line in lines if line and line[0] != "-"}


def package_file(engine: str):
    """An engine's own wheel, kept apart to be installed with --no-deps (VoxCPM2's declares
    packages its inference path never imports: requirements/voxcpm.txt)."""
    return ROOT / "requirements" / f"{engine}-package.txt"


def test_the_image_installs_torch_first_then_base_and_each_chosen_engine(tmp_path):
    instructions = dockerfile_instructions()
    (arg,) = [i for i in instructions if i.startswith("ARG ENGINES=")]
    default = arg.removeprefix("ARG ENGINES=").split(",")
    assert sorted(default) == sorted(SPECS)  # the default image serves every engine
    (install,) = [i for i in instructions if i.startswith("RUN") and "pip install" in i]
    copied = [i for i in instructions[: instructions.index(install)] if i.startswith("COPY")]
    assert "COPY requirements.txt ." in copied and "COPY requirements/ requirements/" in copied
    # What the image serves by default is what it holds.
    assert any(re.search(r"\bTTS_ENGINES=\$\{?ENGINES\b", i) for i in instructions if i.startswith("ENV "))

    # Run the RUN line's shell with a pip that only records its arguments.
    log = tmp_path / "pip.log"
    (tmp_path / "pip").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (tmp_path / "pip").chmod(0o755)

    def pip_calls(engines: str) -> subprocess.CompletedProcess:
        log.write_text("")
        return subprocess.run(
            ["sh", "-c", install.removeprefix("RUN ")],
            cwd=ROOT,
            env={"PATH": f"{tmp_path}:/usr/bin:/bin", "ENGINES": engines},
            capture_output=True,
            text=True,
        )

    pins = {re.search(r"^torch==\S+", (ROOT / "requirements" / f"{e}.txt").read_text(), re.M)[0] for e in SPECS}
    (torch,) = pins  # the engines agree on torch, and the image installs that one
    for engines in ["kokoro", "chattts", "voxcpm", ",".join(default)]:
        result = pip_calls(engines)
        assert result.returncode == 0, result.stderr
        first, second, *wheels = log.read_text().splitlines()
        assert first == f"install {torch}"  # torch alone, first
        files = re.findall(r"-r (\S+)", second)
        assert files == ["requirements/base.txt"] + [f"requirements/{e}.txt" for e in engines.split(",")]
        assert "--no-deps" not in second
        # Then, alone and without their declared dependencies, the wheels kept apart (VoxCPM2's).
        packages = [f"-r requirements/{e}-package.txt" for e in engines.split(",") if package_file(e).exists()]
        assert wheels == ([f"install --no-deps {' '.join(packages)}"] if packages else [])
    assert pip_calls("kokoro,nope").returncode != 0  # an engine this code does not know fails the build

    # An engine's image holds no other engine's package: Kokoro's has no ChatTTS.
    base = requirement_names(ROOT / "requirements" / "base.txt")
    for engine in SPECS:
        installed = base | requirement_names(ROOT / "requirements" / f"{engine}.txt")
        if package_file(engine).exists():
            installed |= requirement_names(package_file(engine))
        assert engine in installed
        assert not installed & (set(SPECS) - {engine}), engine
    # requirements.txt (the whole stack) is base and every engine.
    included = re.findall(r"^-r (\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert sorted(included) == sorted(["requirements/base.txt"] + [f"requirements/{e}.txt" for e in SPECS])


# --- docker compose -------------------------------------------------------------------------


def test_compose_runs_migrations_web_one_worker_per_engine_and_the_light_worker():
    services = compose()["services"]
    synthesis = {f"worker-{engine}": spec for engine, spec in SPECS.items()}
    assert {"postgres", "redis", "migrate", "web", "light"} | set(synthesis) <= set(services)
    assert services["migrate"]["command"][:3] == ["python", "manage.py", "migrate"]
    light = services["light"]["command"]
    assert queues_of(light) == [settings.CELERY_TASK_DEFAULT_QUEUE] and "--beat" in light
    for name, spec in synthesis.items():
        service = services[name]
        command = service["command"]
        assert queues_of(command) == [spec.queue_name]  # one engine's queue, nothing else
        assert engine_of_queues(queues_of(command)) == spec.name  # as the worker itself reads it
        assert "-c" not in command  # its pool is TTS_MAX_BATCH threads around one model, set by the worker
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["capabilities"] == ["gpu"] and device["driver"] == "nvidia"
        assert service["environment"]["TTS_DEVICE"].startswith("cuda")
        assert int(service["environment"]["TTS_MAX_BATCH"]) >= 1
    names = [option(services[name]["command"], "-n") for name in synthesis]
    assert len(set(names)) == len(names)  # Celery node names must differ
    # Only the synthesis workers consume an engine's queue or reserve a GPU.
    for name, service in services.items():
        if name not in synthesis:
            assert not set(queues_of(service.get("command") or [])) & set(engine_queues()), name
            assert "devices" not in str(service.get("deploy")), name
    dockerfile = DOCKERFILE.read_text()
    assert "tts_saas.asgi:application" in dockerfile and "--lifespan" in dockerfile


def test_compose_builds_what_it_serves_and_documents_kokoro_alone():
    spec = compose()
    services = spec["services"]
    served = spec["x-app"]["environment"]["TTS_ENGINES"]
    # One variable decides both what the web serves and what the image installs.
    assert spec["x-app"]["build"]["args"]["ENGINES"] == served
    default = re.fullmatch(r"\$\{TTS_ENGINES:-([a-z0-9_,-]+)\}", served)[1].split(",")
    assert set(default) <= set(SPECS)
    assert {f"worker-{engine}" for engine in default} <= set(services)  # every engine served has a worker
    for name, service in services.items():
        if "environment" in service and "DATABASE_URL" in service["environment"]:
            assert service["environment"]["TTS_ENGINES"] == served, name
    # The commands the file documents for serving only what may be sold start no other engine's worker.
    text = COMPOSE.read_text()
    commercial = [name for name, s in SPECS.items() if s.commercial]
    assert commercial and f"TTS_ENGINES={','.join(commercial)}" in text
    commands = re.findall(r"^#\s+docker compose -f deploy/docker-compose\.yml up (.*)$", text, re.M)
    started = [[a for a in c.split() if not a.startswith("-")] for c in commands if "worker-" in c]
    assert started, "no documented command that names the services to start"
    for names in started:
        assert set(names) <= set(services)
        engines = [n.removeprefix("worker-") for n in names if n.startswith("worker-")]
        assert sorted(engines) == sorted(commercial)


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
    ratio must not match on labels one side has summed away (it would plot nothing). A figure kept
    per engine is plotted per engine: summed over engines, one engine's queue hides another's."""
    families = {family.name: family for family in SynthesisCollector().describe()}
    per_engine = {name for name, family in families.items() if "engine" in family._labelnames}
    assert per_engine
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "tts_saas.json").read_text())
    checked = 0
    for expr in (t["expr"] for p in dashboard["panels"] for t in p["targets"]):
        plotted = {re.sub(r"_(bucket|total)$", "", n) for n in re.findall(r"tts_[a-z_]+", expr)}
        if not set(families) & plotted:
            continue
        checked += 1
        assert "ignoring(" not in expr and "on(" not in expr, expr
        for term in expr.split(" / "):
            assert re.match(r"^(max|sum|min|avg)\b", term.strip()), f"not aggregated across replicas: {expr}"
        if per_engine & plotted:
            assert re.search(r"\bby \([^)]*\bengine\b", expr), f"not per engine: {expr}"
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
    worker = worker_deployment("kokoro")
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
            queues = queues_of(command)
            assert set(queues) <= set(engine_queues()) | {settings.CELERY_TASK_DEFAULT_QUEUE}, queues
            # One engine per worker process (synthesis/worker/lifecycle.py exits otherwise).
            assert len(set(queues) & set(engine_queues())) <= 1, queues
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


def test_every_queue_the_code_sends_to_has_a_worker(monkeypatch):
    sent = queues_the_code_sends_to(monkeypatch)
    assert set(engine_queues()) | {"default"} <= sent  # each engine's jobs on its own queue
    consumed = set().union(*(consumed_queues(w) for w in workloads()))
    assert sent <= consumed, f"no Kubernetes worker for {sorted(sent - consumed)}"
    in_compose = {q for s in compose()["services"].values() for q in queues_of(s.get("command") or [])}
    assert sent <= in_compose, f"no compose worker for {sorted(sent - in_compose)}"


@pytest.mark.parametrize("engine", list(SPECS))
def test_each_engine_has_a_worker_that_owns_one_gpu_and_one_model(engine):
    spec, worker = SPECS[engine], worker_deployment(engine)
    (container,) = pod(worker)["containers"]
    command = container["command"]
    assert queues_of(command) == [spec.queue_name]  # that engine's queue alone
    assert engine_of_queues(queues_of(command)) == engine  # as the worker itself reads it
    assert "-c" not in command  # one process, one model, per GPU; its threads are TTS_MAX_BATCH
    assert command == compose()["services"][f"worker-{engine}"]["command"]
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert labels[ENGINE_LABEL] == engine and worker["spec"]["selector"]["matchLabels"][ENGINE_LABEL] == engine
    limits, requests = container["resources"]["limits"], container["resources"].get("requests", {})
    assert str(limits["nvidia.com/gpu"]) == "1"
    assert str(requests.get("nvidia.com/gpu", 1)) == "1"  # extended resources: requests must equal limits
    assert memory_bytes(requests["memory"]) <= memory_bytes(limits["memory"])
    assert env(container)["TTS_DEVICE"].startswith("cuda")
    assert int(env(container)["TTS_MAX_BATCH"]) >= 1
    assert container["readinessProbe"]["exec"]["command"][:2] == ["python", "-c"]
    # The comments name the download the cache volume holds, and this engine's model directory setting.
    text = manifest_text("Deployment", worker["metadata"]["name"])
    cache_comment = re.search(r"((?:^ *#.*\n)+) *- name: hf-cache\n", text, re.M)
    assert cache_comment and spec.weights_source.removeprefix("https://huggingface.co/") in cache_comment[1]


def model_dirs(monkeypatch, **environ: str) -> dict[str, str]:
    """TTS_MODEL_DIRS as the settings file reads it in this environment, with `environ` added."""
    with monkeypatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        settings_file = str(ROOT / "tts_saas" / "settings.py")
        return runpy.run_path(settings_file, run_name="tts_saas.deploy_check")["TTS_MODEL_DIRS"]


@pytest.mark.parametrize("engine", list(SPECS))
def test_the_commented_model_directory_is_the_engines_own(engine, monkeypatch):
    """Uncommenting the model directory shown for a worker gives THAT engine its directory."""
    (container,) = pod(worker_deployment(engine))["containers"]
    text = manifest_text("Deployment", worker_deployment(engine)["metadata"]["name"])
    shown = re.findall(r"^ *# - \{name: (TTS_\w+), value: (\S+)\}", text, re.M)
    compose_text = COMPOSE.read_text().split(f"  worker-{engine}:\n", 1)[1].split("\n  worker-", 1)[0]
    shown += re.findall(r"^ *# (TTS_\w+): (\S+)$", compose_text, re.M)
    assert len(shown) == 2, shown  # one in the Deployment, one in the compose service
    for name, value in shown:
        assert name not in env(container)
        assert model_dirs(monkeypatch, **{name: value}) == {**model_dirs(monkeypatch), engine: value}, name


def test_only_the_synthesis_workers_ask_for_a_gpu_or_consume_an_engine_queue():
    """The GPU is the scarce thing; and a light worker on an engine's queue would load that model."""
    names = {w["metadata"]["name"] for w in synthesis_workers()}
    selectors = [w["spec"]["selector"]["matchLabels"] for w in synthesis_workers()]
    assert len({tuple(sorted(s.items())) for s in selectors}) == len(selectors)  # no pod in two Deployments
    for workload in workloads():
        if workload["metadata"]["name"] in names:
            continue
        assert all("nvidia.com/gpu" not in str(c.get("resources")) for c in containers(workload))
        assert not consumed_queues(workload) & set(engine_queues()), workload["metadata"]["name"]


def test_kokoro_asks_for_less_memory_than_chattts():
    """82 M parameters: its pods are sized smaller, so more of them fit a node."""
    (kokoro,) = pod(worker_deployment("kokoro"))["containers"]
    (chattts,) = pod(worker_deployment("chattts"))["containers"]
    for kind in ("requests", "limits"):
        assert memory_bytes(kokoro["resources"][kind]["memory"]) < memory_bytes(chattts["resources"][kind]["memory"])
    assert memory_bytes(kokoro["resources"]["requests"]["memory"]) <= 2 * 2**30


def test_the_configmap_serves_engines_that_have_workers():
    config = resource("ConfigMap", "tts-saas-config")["data"]
    served = config["TTS_ENGINES"].split(",")
    assert served and set(served) <= set(SPECS)
    assert config["TTS_DEFAULT_MODEL"] in served
    workers_of = {w["spec"]["template"]["metadata"]["labels"][ENGINE_LABEL] for w in synthesis_workers()}
    assert set(served) == workers_of  # no engine without a worker, no GPU held for an engine not served
    # Whoever bills reads here which engine may not be sold.
    text = manifest_text("ConfigMap", "tts-saas-config")
    for engine, spec in SPECS.items():
        if not spec.commercial:
            assert "non-commercial" in text and spec.title in text, engine


class FakeRedis:
    """Just what synthesis.service.workers.register writes and the readiness probe reads."""

    def __init__(self):
        self.zsets: dict[str, dict[bytes, float]] = defaultdict(dict)
        self.hashes: dict[str, dict[bytes, bytes]] = defaultdict(dict)
        self.strings: dict[str, bytes] = {}

    def pipeline(self):
        return self

    def execute(self):
        return []

    def set(self, key, value, ex=None):
        self.strings[key] = value

    def zadd(self, key, mapping):
        self.zsets[key].update({str(m).encode(): s for m, s in mapping.items()})

    def hset(self, key, field, value):
        self.hashes[key][str(field).encode()] = value.encode()

    def zrangebyscore(self, key, low, high):
        assert high == "+inf"
        return [m for m, s in self.zsets[key].items() if s >= float(low)]

    def hget(self, key, field):
        return self.hashes[key].get(field if isinstance(field, bytes) else field.encode())


@pytest.mark.parametrize("engine", list(SPECS))
def test_the_worker_is_ready_only_once_its_own_model_is_loaded(engine, monkeypatch):
    """Runs the readiness probe's code against what the worker's registration writes."""
    container = pod(worker_deployment(engine))["containers"][0]
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
    for other in ("elsewhere:1:a", f"{host}-other:1:a"):  # other pods' ready workers do not count
        fake.zadd(workers.REGISTRY, {other: later})
        info = {"engine": engine, "status": "ready", "model_version": "v", "error": "", "capacity": 8}
        fake.hset(workers.INFO, other, json.dumps(info))
    assert not ready()
    for other_engine in set(SPECS) - {engine}:  # this pod, but another engine's model
        workers.register(other_engine, "ready", model_version="v0", capacity=8)
        assert not ready()
    workers.register(engine, "unavailable", error="checksum mismatch")
    assert not ready()
    workers.register(engine, "ready", model_version="v1", capacity=8)
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
        for package in ("tts_saas", "accounts", "billing", "synthesis", "voices", "dashboard", "inference")
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
    for word in ("TTS_MAX_BATCH", "nvidia.com/gpu", "device plugin", SECRET_NAME, "TTS_ENGINES", "ENGINES=kokoro"):
        assert word in section, word
    for engine, spec in SPECS.items():  # each engine's queue and worker Deployment
        assert spec.queue_name in section and f"tts-saas-worker-{engine}" in section, engine
    sources = [
        ROOT / "tts_saas" / "metrics.py",
        ROOT / "synthesis" / "service" / "metrics.py",
        ROOT / "synthesis" / "worker" / "metrics.py",
    ]
    defined = {n for p in sources for n in re.findall(r'"(tts_[a-z_]+)"', p.read_text())}
    exported = defined | {f"{n}_total" for n in defined} | {f"{n}_bucket" for n in defined}
    mentioned = {n for n in re.findall(r"\b(tts_[a-z_]+)", section) if not n.startswith("tts_saas")}
    assert mentioned, "the section names no metric to watch"
    assert mentioned <= exported, f"not exported: {sorted(mentioned - exported)}"


def test_the_manifests_name_the_image_compose_builds():
    image = compose()["x-app"]["image"]
    images = {c["image"] for w in workloads() for c in containers(w)}
    assert images == {image}
