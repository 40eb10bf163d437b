"""Where a Kokoro request's time goes through the service, per stage, for one client and for N at once.

    .venv/bin/python bench/kokoro_profile.py [--clients 1 4] [--rounds 3] [--threads N] [--batch 8]
        [--precision int8] [--weights real] [--py-spy /opt/tools/bin/py-spy]

This service as `scripts/run` runs it (uvicorn, one Kokoro worker, SQLite, the organization on zero
retention so that nothing comes from the cache), the full-size random checkpoint (`--weights real`:
Kokoro's real weights, voice jf_alpha), `--precision` as TTS_PRECISION, the official
`openai` SDK as the client, the text of bench/kokoro_peer.py. While the clients run, py-spy (a
sampling profiler; `pip install py-spy`, outside this repository) samples the worker and the web
process (100 Hz, every thread, idle threads left out), and each process's CPU seconds are read from
/proc. Prints, per scenario: the wall time, each process's CPU seconds (and the machine's idle),
and each process's samples by stage (text normalisation, G2P, ALBERT, text and duration encoders,
F0/N predictor, decoder, encoding, Redis streams, the database, Celery and the rest). Asserts
nothing.
"""

from __future__ import annotations

import collections
import os
import subprocess
import threading
import time
from pathlib import Path

from common import Stack, checkpoint, setup
from kokoro_peer import TEXT, VOICE, zero_retention

# A stack's stage: the first rule whose words appear in it (frames are "function (file:line)").
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("decoder (iSTFTNet)", ("run_decoder (", "_generate (", "harmonics (")),
    ("F0/N predictor", ("_f0_n (",)),
    ("ALBERT", ("modeling_albert",)),
    ("text and duration encoders", ("forward (inference/kokoro/model.py", "kokoro/modules.py")),
    ("G2P (misaki, spaCy, espeak)", ("kokoro/g2p.py", "misaki/", "spacy/", "phonemizer")),
    ("text normalisation", ("inference/text/preparation.py", "/tn/")),
    ("audio encoding", ("audio/formats.py", "/av/", "soundfile")),
    ("Redis streams", ("audio/streams.py", "redis/")),
    ("database", ("django/db/",)),
    ("Celery", ("celery/", "kombu/", "billiard/")),
    ("web: ASGI and Django", ("uvicorn/", "django/", "channels/", "asgiref/", "rest_framework/")),
]


def stage_of(stack: str) -> str:
    return next((name for name, words in STAGES if any(w in stack for w in words)), "other")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def machine_idle() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return (int(fields[3]) + int(fields[4])) / os.sysconf("SC_CLK_TCK")  # idle + iowait, all cores


class Profile:
    """py-spy recording one process until stopped: samples per stage."""

    def __init__(self, py_spy: str, pid: int, out: Path):
        self.out = out
        self.proc = subprocess.Popen(
            [py_spy, "record", "--pid", str(pid), "--rate", "100", "--format", "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached before the load starts

    def stop(self) -> collections.Counter:
        self.proc.send_signal(2)  # SIGINT: py-spy writes what it sampled
        self.proc.wait(30)
        counts: collections.Counter = collections.Counter()
        for line in self.out.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if n.isdigit():
                counts[stage_of(stack)] += int(n)
        return counts


def run_clients(stack: Stack, n: int, rounds: int) -> float:
    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.base_url}/v1", api_key=stack.key, timeout=600, max_retries=0)

    def one() -> None:
        client.audio.speech.create(model="kokoro", voice=VOICE, input=TEXT, response_format="wav").read()

    started = time.perf_counter()
    for _ in range(rounds):
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return time.perf_counter() - started


def main() -> None:
    def extra(parser):
        parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--threads", type=int, default=None, help="TTS_TORCH_THREADS of the worker")
        parser.add_argument("--batch", type=int, default=8, help="TTS_MAX_BATCH of the worker")
        parser.add_argument("--py-spy", default="py-spy")
        parser.add_argument("--precision", default=None, help="TTS_PRECISION of the worker")
        parser.add_argument("--weights", default="random", choices=["random", "real"])

    global VOICE
    args = setup(__doc__, runs=1, extra=extra)
    VOICE = "af_heart" if args.weights == "random" else "jf_alpha"
    env = {"TTS_MAX_BATCH": str(args.batch)}
    if args.threads is not None:
        env["TTS_TORCH_THREADS"] = str(args.threads)
    if args.precision:
        env["TTS_PRECISION"] = args.precision
    with Stack(checkpoint("full" if args.weights == "random" else "real", "kokoro"), engine="kokoro", **env) as stack:
        zero_retention(stack)
        pids = {"worker": stack.worker.popen.pid, "web": stack.web.popen.pid}
        run_clients(stack, 1, 1)  # warm
        print(f"worker {env}; text: {TEXT!r}, voice {VOICE}, WAV")
        for n in args.clients:
            profiles = {name: Profile(args.py_spy, pid, stack.tmp / f"{name}-{n}.txt") for name, pid in pids.items()}
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            idle_before = machine_idle()
            wall = run_clients(stack, n, args.rounds)
            idle = machine_idle() - idle_before
            cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
            print(f"\n{n} client(s) x {args.rounds} rounds: {wall:.2f} s wall, {wall / args.rounds:.2f} s a round")
            print(
                "   CPU seconds: "
                + ", ".join(f"{name} {s:.2f}" for name, s in cpu.items())
                + f"; machine idle {idle:.2f} "
                f"(of {wall * os.cpu_count():.2f} core-seconds)"
            )
            for name, profile in profiles.items():
                counts = profile.stop()
                total = sum(counts.values()) or 1
                shares = ", ".join(f"{stage} {100 * c / total:.0f}%" for stage, c in counts.most_common())
                print(f"   {name} samples ({total}, 100 Hz, threads summed): {shares}")


if __name__ == "__main__":
    main()
