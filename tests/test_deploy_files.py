"""The deployment files describe the processes the code has, and the Grafana dashboard plots
metrics that /metrics really exports (there is no Docker engine here to run the images)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
import yaml
from django.conf import settings

from tests.stack import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def test_compose_runs_migrations_web_and_both_kinds_of_worker():
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "light"} <= set(services)
    assert services["migrate"]["command"][:3] == ["python", "manage.py", "migrate"]
    worker, light = services["worker"]["command"], services["light"]["command"]
    assert worker[worker.index("-Q") + 1] == settings.CELERY_TASK_ROUTES["synthesis.tasks.synthesize_job"]["queue"]
    assert worker[worker.index("-c") + 1] == "1"  # one model per GPU
    assert light[light.index("-Q") + 1] == "default" and "--beat" in light
    assert services["worker"]["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "tts_saas.asgi:application" in dockerfile and "--lifespan" in dockerfile


def test_the_grafana_dashboard_plots_metrics_that_exist(live_stack, owner):
    with live_stack.client(owner.key) as client:
        client.post("/audio/speech", json={"input": "Graph me.", "seed": 1, "response_format": "pcm"})
    exported = httpx.get(f"{live_stack.base_url}/metrics").text
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "tts_saas.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    names = {re.sub(r"_(bucket|total)$", "", n) for e in expressions for n in re.findall(r"tts_[a-z_]+", e)}
    assert names
    for name in names:
        assert re.search(rf"^# TYPE {name}(_total)? ", exported, re.M), f"{name} is plotted but not exported"
