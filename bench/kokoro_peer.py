"""This service's Kokoro against a peer Kokoro server on the same machine, in the same run, with the
same checkpoint files and the official `openai` SDK as the client.

    .venv/bin/python bench/kokoro_peer.py --peer-start "/opt/kfa/start.sh {port}" [--runs 3] [--weights real]
        [--clients 4 8] [--threads N] [--batch 8] [--precision bf16] [--phases single stream clients memory]

The peer is any OpenAI-compatible Kokoro server started by `--peer-start` (a shell command with
`{port}`; docs/benchmarks.md says how Kokoro-FastAPI was installed for it, outside this repository)
on the full-size random checkpoint in var/checkpoints/kokoro-full (noise, not speech: the compute is
real), or with `--weights real` on Kokoro's real weights (var/checkpoints/kokoro-real, voice
jf_alpha: speech of real lengths); SHA-256 printed: point the peer at the same files. This service
runs as `scripts/run` runs it: uvicorn and one Kokoro worker (`TTS_MAX_BATCH`, torch threads
`--threads`, else the worker's default), on SQLite, the organization on zero retention so that no
answer comes from the cache (checked: two identical requests, both `x-cache: miss`).

Measured in turns (peer, then ours, each run), medians of `--runs`:
1. single: one request, the whole WAV;
2. stream: one streamed PCM request, its first bytes and its end;
3. clients: N clients released together, until all are done, and errors;
4. memory: the resident set of the process holding the model, when ready and its peak over the
   run (sampled every 50 ms).
Prints each figure and ours / the peer's. Asserts nothing.
"""

from __future__ import annotations

import hashlib
import os
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

from common import ROOT, Stack, checkpoint, setup

TEXT = "Please remember to bring your notebook to the meeting tomorrow."
VOICE = "af_heart"  # jf_alpha with --weights real (the converted packages' voices)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return float("nan")


def listening_pid(port: int) -> int | None:
    """The process listening on 127.0.0.1:`port` (the one holding the model, for a one-process server)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inode = fields[9]
    if inode is None:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]" for fd in os.listdir(f"/proc/{pid}/fd")):
                return int(pid)
        except OSError:
            continue
    return None


class Peer:
    """The peer server, started by a shell command, stopped by its listening port's process group."""

    def __init__(self, command: str, log: Path):
        from tests.stack import free_port

        self.port = free_port()
        self.log = open(log, "wb")
        self.popen = subprocess.Popen(
            command.format(port=self.port),
            shell=True,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 600
        import httpx

        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.popen.poll() is not None:
                raise RuntimeError(f"the peer exited: see {log}")
            time.sleep(0.5)
        self.pid = listening_pid(self.port) or self.popen.pid

    def close(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
            self.popen.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.log.close()


class Memory:
    """Samples a process's resident set every 50 ms while running: its value when started, its peak."""

    def __init__(self, pid: int):
        self.pid, self.start, self.peak = pid, rss_mb(pid), rss_mb(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.start, self.peak


class Server:
    def __init__(self, name: str, base_url: str, key: str, pid: int, model: str, extra: dict | None = None):
        from openai import OpenAI

        self.name, self.pid, self.model, self.extra = name, pid, model, extra or {}
        self.client = OpenAI(base_url=base_url, api_key=key, timeout=600, max_retries=0)

    def whole(self, text: str = TEXT, fmt: str = "wav") -> float:
        started = time.perf_counter()
        self.client.audio.speech.create(
            model=self.model, voice=VOICE, input=text, response_format=fmt, extra_body=self.extra
        ).read()
        return time.perf_counter() - started

    def streamed(self, text: str = TEXT) -> tuple[float, float, int]:
        started, first, size = time.perf_counter(), None, 0
        with self.client.audio.speech.with_streaming_response.create(
            model=self.model, voice=VOICE, input=text, response_format="pcm", extra_body=self.extra
        ) as response:
            for chunk in response.iter_bytes():
                if chunk and first is None:
                    first = time.perf_counter() - started
                size += len(chunk)
        return first or float("nan"), time.perf_counter() - started, size

    def clients(self, n: int) -> tuple[float, int]:
        gate, errors = threading.Barrier(n + 1), []

        def one() -> None:
            gate.wait()
            try:
                self.whole()
            except Exception as exc:  # an error is counted, not raised: the figure says how many
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        gate.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        return time.perf_counter() - started, len(errors)


def zero_retention(stack: Stack) -> None:
    code = "from accounts.models import Organization; Organization.objects.update(data_retention='zero')"
    subprocess.check_call([str(ROOT / ".venv/bin/python"), "manage.py", "shell", "-c", code], cwd=ROOT, env=stack.env)


def cache_missed(ours: Server) -> bool:
    states = []
    for _ in range(2):
        raw = ours.client.audio.speech.with_raw_response.create(model="kokoro", voice=VOICE, input=TEXT)
        states.append(raw.headers.get("x-cache"))
    print(f"   x-cache of two identical requests: {states}")
    return all(s != "hit" for s in states)


def report(label: str, figures: dict[str, list[float]], unit: str = "s") -> None:
    peer, ours = statistics.median(figures["peer"]), statistics.median(figures["ours"])
    runs = "; ".join(f"{name} {', '.join(f'{x:.2f}' for x in values)}" for name, values in figures.items())
    print(f"   {label}: peer {peer:.2f} {unit}, ours {ours:.2f} {unit}, ours / peer = {ours / peer:.2f}  ({runs})")


def main() -> None:
    def extra(parser):
        parser.add_argument("--peer-start", required=True, help="shell command starting the peer, with {port}")
        parser.add_argument("--clients", type=int, nargs="+", default=[4, 8])
        parser.add_argument("--threads", type=int, default=None, help="TTS_TORCH_THREADS of our worker")
        parser.add_argument("--batch", type=int, default=8, help="TTS_MAX_BATCH of our worker")
        parser.add_argument(
            "--precision", default=None, help="TTS_PRECISION of our worker (bf16: its decoder's resblocks)"
        )
        parser.add_argument("--phases", nargs="+", default=["single", "stream", "clients", "memory"])
        parser.add_argument("--weights", default="random", choices=["random", "real"])

    global VOICE
    args = setup(__doc__, runs=3, extra=extra)
    model_dir = Path(checkpoint("full" if args.weights == "random" else "real", "kokoro"))
    VOICE = "af_heart" if args.weights == "random" else "jf_alpha"
    for name in ("kokoro-v1_0.pth", f"voices/{VOICE}.pt"):
        print(f"{name}: sha256 {sha256(model_dir / name)}")
    env = {"TTS_MAX_BATCH": str(args.batch)}
    if args.threads is not None:
        env["TTS_TORCH_THREADS"] = str(args.threads)
    if args.precision:
        env["TTS_PRECISION"] = args.precision
    with Stack(str(model_dir), engine="kokoro", **env) as stack:
        zero_retention(stack)
        peer = Peer(args.peer_start, stack.tmp / "peer.log")
        try:
            servers = {
                # lang_code "a": the peer reads a voice's text in the language of its id's first letter
                # (j for the real weights' Japanese voices) unless told; ours reads English by script.
                "peer": Server("peer", peer.base_url, "x", peer.pid, "kokoro", {"lang_code": "a"}),
                "ours": Server("ours", f"{stack.base_url}/v1", stack.key, stack.worker.popen.pid, "kokoro"),
            }
            print(f"ours: {env}; peer: {args.peer_start}")
            memory = {name: Memory(s.pid) for name, s in servers.items()}  # ready, nothing run yet
            if not cache_missed(servers["ours"]):
                raise SystemExit("our answers came from the cache: the figures would not be of synthesis")
            for s in servers.values():
                s.whole()  # warm both paths
            if "single" in args.phases:
                figures: dict[str, list[float]] = {"peer": [], "ours": []}
                for _ in range(args.runs):
                    for name, s in servers.items():
                        figures[name].append(s.whole())
                print("1. one request, the whole WAV")
                report("wall", figures)
            if "stream" in args.phases:
                first: dict[str, list[float]] = {"peer": [], "ours": []}
                whole: dict[str, list[float]] = {"peer": [], "ours": []}
                for _ in range(args.runs):
                    for name, s in servers.items():
                        f, w, _ = s.streamed()
                        first[name].append(f)
                        whole[name].append(w)
                print("2. one streamed PCM request")
                report("first audio", first)
                report("whole", whole)
            if "clients" in args.phases:
                print("3. clients released together, until all are done")
                for n in args.clients:
                    walls: dict[str, list[float]] = {"peer": [], "ours": []}
                    errors = {"peer": 0, "ours": 0}
                    for _ in range(args.runs):
                        for name, s in servers.items():
                            wall, failed = s.clients(n)
                            walls[name].append(wall)
                            errors[name] += failed
                    report(f"{n} clients", walls)
                    print(f"      errors: peer {errors['peer']}, ours {errors['ours']}")
            print("4. resident set of the process holding the model (MB): when ready -> peak")
            for name, m in memory.items():
                start, peak = m.stop()
                print(f"   {name}: {start:.0f} -> {peak:.0f}")
        finally:
            peer.close()


if __name__ == "__main__":
    main()
