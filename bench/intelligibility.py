"""Intelligibility, with Whisper as the oracle (issue 43, parts 3 and 4): sentences spoken by Kokoro-82M's
real weights (var/checkpoints/kokoro-real, voice jf_alpha) through every path of the service, heard by
Whisper (tests/listening.py, `base` by default), scored by word error rate; the silences inside sentences;
the word timings the service gives (captions, SSE segment events, WebSocket `end`, speech marks) against
the times Whisper hears the same words; SSML breaks measured as silence. Optionally the same sets through
a peer Kokoro server (Kokoro-FastAPI, installed outside this repository: docs/benchmarks.md says how).

    .venv/bin/python bench/intelligibility.py [--paths rest job ...] [--sets read numbers ...] [--limit N]
        [--repeat N] [--voices jf_alpha ...] [--whisper base] [--peer-start "/opt/kfa/start.sh {port}"]
        [--save results.json]

Sets (bench/sentences/): `read` (plain sentences), `numbers` (numbers, money, percentages, times, dates,
ordinals, phone numbers, e-mail addresses, URLs, units, temperatures, abbreviations, symbols: each with a
written and a spoken reference), `ssml` (breaks, say-as, sub, marks), `lexicon` (a lexicon's entries and
sentences that use them), `long` (one text of 2,000+ words, for the long-form job).

Paths (each with the sets it speaks by default; `--sets` narrows them):
  engine      KokoroEngine in this process, the sentence as one segment: no service, no splitting
  rest        POST /v1/audio/speech, `wav`, the whole body
  stream      the same, `pcm`, read as it streams
  sse         `stream_format: sse`: audio deltas and `speech.audio.segment` events (word timings)
  ws1         WebSocket `tts.v1`, one `synthesize` a sentence (timings from `end`)
  ws2         WebSocket `tts.v2`, the text sent word by word, then `close` (timings from `end`)
  job         POST /v1/jobs, polled, its audio and GET /v1/jobs/{id}/captions
  long        one job of the long text; heard in clips cut between its caption segments
  batch4/8    4 or 8 REST requests released together (TTS_MAX_BATCH=8: batched in one worker)
  speed0.8/1.25  REST with that speed
  ssml        SSML over SSE: words, marks and breaks
  lexicon, lexicon-off  the lexicon's sentences with it, and without it (the same reference)
  bf16        REST on a worker with TTS_PRECISION=bf16 (its decoder's resblocks in bfloat16)
  int8        REST on a worker with TTS_PRECISION=int8 (its decoder's convolutions in int8)
  engine-bf16, engine-int8  the engine path at that precision (not in the default run)
  onnx        the int8 ONNX graph the real weights come from, in onnxruntime (dynamic int8: its
              convolutions and matrix products), the engine's phonemes and voice (not in the default run)
  peer        the peer's POST /v1/audio/speech (`pcm`, stream false, lang_code "a")
  peer-timings  the peer's /dev/captioned_speech (its word timestamps)
  engine1.25, peer1.25  speed 1.25 in the engine and on the peer (not in the default run)

Scoring: corpus WER (all errors over all reference words) after Whisper's English normaliser and a few
rewrites applied to reference and hypothesis alike (`canonical`: normaliser artefacts such as "9:30 a.m."
→ "9 30 a m" against "9.30am" → "9.30 am"); an item with two references is scored against the one it is
nearer. "plain" is the normaliser alone against the spoken reference. The cache stays out of it: the
workers keep no entry (TTS_CACHE_MAX_ENTRY_BYTES=1), and every REST answer's x-cache is counted.
Timings: each caption word's start against Whisper's start of the same word (moved out of a silence it
falls in). Where they differ by more than 150 ms, the cut test (`cut_test`) asks whose start is right:
the audio is cut at each start and Whisper hears what follows; the start after which the word is heard
first is right. Whisper's own stamps drift over a "word" it writes for several spoken ones ("$50,000").
Prints tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import os
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from pathlib import Path

import numpy as np
from common import ROOT, Stack

sys.path.insert(0, str(ROOT))
from tests import listening

SENTENCES = Path(__file__).resolve().parent / "sentences"
CHECKPOINT = ROOT / "var" / "checkpoints" / "kokoro-real"
VOICE = "jf_alpha"  # the converted packages carry five Japanese voices, which speak English intelligibly
VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
RATE = 24_000
SETS = ("read", "numbers", "ssml", "lexicon", "long")
PATHS = {
    "engine": ("read", "numbers"),
    "rest": ("read", "numbers"),
    "stream": ("read",),
    "sse": ("read", "numbers"),
    "ws1": ("read",),
    "ws2": ("read", "numbers"),
    "job": ("read", "numbers"),
    "batch4": ("read",),
    "batch8": ("read",),
    "speed0.8": ("read",),
    "speed1.25": ("read",),
    "ssml": ("ssml",),
    "lexicon": ("lexicon",),
    "lexicon-off": ("lexicon",),
    "long": ("long",),
    "bf16": ("read", "numbers"),
    "int8": ("read", "numbers"),
    "engine-bf16": ("read", "numbers"),
    "engine-int8": ("read", "numbers"),
    "onnx": ("read", "numbers"),
    "peer": ("read", "numbers"),
    "peer-timings": ("read",),
    "engine1.25": ("read",),  # not in the default run: where speed 1.25 goes wrong, engine or service
    "peer1.25": ("read",),
}
DEFAULT_PATHS = [p for p in PATHS if not p.endswith(("1.25", "-bf16", "-int8", "onnx")) or p == "speed1.25"]
PRECISIONS = ("bf16", "int8")  # REST paths on a worker at that TTS_PRECISION
SERVICE = [p for p in PATHS if not p.startswith(("engine", "peer", "onnx", *PRECISIONS))]
BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.0}


# The sets.


@dataclass(frozen=True)
class Item:
    set: str
    text: str  # what is sent
    refs: tuple[str, ...]  # references: one, or a written and a spoken one (the last is the spoken)
    voice: str = VOICE


def lines(name: str) -> list[str]:
    text = (SENTENCES / f"{name}.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def lexicon_entries() -> list[tuple[str, str]]:
    return [
        tuple(p.strip() for p in line[6:].split(" = ", 1)) for line in lines("lexicon") if line.startswith("entry:")
    ]


def load(name: str) -> list[Item]:
    if name == "read":
        return [Item(name, line, (line,)) for line in lines(name)]
    if name in ("numbers", "ssml"):
        items = []
        for line in lines(name):
            text, written, spoken = (p.strip() for p in line.split(" | "))
            items.append(Item(name, text, (text if written == "=" else written, spoken)))
        return items
    if name == "lexicon":
        entries = lexicon_entries()
        items = []
        for line in (x for x in lines(name) if not x.startswith("entry:")):
            ref = line
            for text, alias in entries:
                ref = re.sub(rf"(?<!\w){re.escape(text)}(?!\w)", alias, ref)
            items.append(Item(name, line, (ref,)))
        return items
    body = (SENTENCES / "long.txt").read_text()
    text = "\n\n".join(p.strip() for p in body.split("\n\n") if p.strip() and not p.startswith("#"))
    return [Item(name, text, (text,))]


# Scoring: Whisper's normaliser, and the rewrites that make equivalent writings one.

UNITS = {"km": "kilometers", "kg": "kilograms", "mph": "miles per hour", "mb": "megabytes", "hrs": "hours"}
FRACTIONS = {"1/2": "one half", "1/3": "one third", "1/4": "one quarter", "2/3": "two thirds", "3/4": "three quarters"}
REWRITES = (  # before the normaliser, on both sides
    (r"\((\d{3})\)\s*", r"\1"),  # (212) 555-7890: the normaliser drops what is in brackets
    (r"\b(\d{3})[ -](?=\d{3}-\d{4}\b)", r"\1"),  # one phone number, one token
    (r"(?<=\d)-(?=\d)", ""),  # 555-0100: the normaliser reads "-0100" as "100"
    (r"\b(\d{1,2}):(\d{2})\b", r"\1\2"),  # 9:30 -> 930, as "nine thirty" becomes
    (r"\b(\d{1,2})\.(\d{2})(?=\s*[ap]\.?\s?m\b)", r"\1\2"),  # 9.30am
    (r"(?<=\w)@(?=\w)", " at "),
    (r"(?<=[a-z]{2})\.(?=[a-z]{2})", " dot "),  # example.com, anna.lee
    (r"(?<=\w)/(?=[a-z])", " slash "),
    (r"°\s?F\b", " degrees Fahrenheit"),
    (r"°\s?C\b", " degrees Celsius"),
    (r"\s\+\s", " plus "),
    (r"\betc\.", "et cetera"),
)


def joined(tokens: list[str], part, least: int) -> list[str]:
    """`tokens` with each run of at least `least` tokens that are `part` joined into one."""
    out: list[str] = []
    run: list[str] = []
    for token in [*tokens, ""]:
        if token and part(token):
            run.append(token)
            continue
        out += ["".join(run)] if len(run) >= least else run
        run = []
        if token:
            out.append(token)
    return out


def canonical(text: str) -> str:
    """Whisper's English normaliser with `REWRITES` before it, then runs of single letters joined
    ("a m" → "am", "w w w" → "www", "u s" → "us"; "a" and "i" stay words) and runs of three or more
    digit groups ("212 555 7890"): applied to both sides."""
    for pattern, repl in REWRITES:
        text = re.sub(pattern, repl, text, flags=re.I)
    text = re.sub(r"\b(\d+)/(\d+)\b", lambda m: FRACTIONS.get(m.group(0), m.group(0)), text)
    text = re.sub(rf"(?<=\d)\s?({'|'.join(UNITS)})\b", lambda m: " " + UNITS[m.group(1).lower()], text, flags=re.I)
    tokens = listening.normalise(text).split()
    tokens = joined(tokens, lambda t: len(t) == 1 and t.isalpha() and t not in "ai", 2)
    tokens = joined(tokens, str.isdigit, 3)  # one number said in groups (a phone's)
    return re.sub(r"\b([ap]) m\b", r"\1m", " ".join(tokens))


def errors(ref: str, hyp: str) -> tuple[int, int]:
    """(errors, reference words) of `hyp` against `ref`, both already normalised."""
    import jiwer

    if not ref.split():
        return len(hyp.split()), 0
    out = jiwer.process_words(ref, hyp or "<nothing>")
    return out.substitutions + out.deletions + out.insertions, len(ref.split())


def score(item_refs: tuple[str, ...], hyp: str) -> tuple[int, int, int]:
    """(errors, words) against the nearest reference after `canonical`, and the plain errors (the
    normaliser alone, the spoken reference)."""
    best = min((errors(canonical(r), canonical(hyp)) for r in item_refs), key=lambda e: e[0] / max(e[1], 1))
    plain, _ = errors(listening.normalise(item_refs[-1]), listening.normalise(hyp))
    return best[0], best[1], plain


# What the audio holds: silences, and Whisper's words against the service's timings.

FRAME = 0.01  # seconds
SILENCE_DB = 40.0  # a frame this far below the take's loud frames (95th percentile) is silent


def frames_db(audio: np.ndarray, rate: int) -> np.ndarray:
    n = int(rate * FRAME)
    k = len(audio) // n
    rms = np.sqrt((audio[: k * n].astype(np.float64).reshape(k, n) ** 2).mean(axis=1))
    return 20 * np.log10(rms + 1e-9)


def silences(audio: np.ndarray, rate: int, start: float = 0.0, end: float | None = None) -> list[tuple[float, float]]:
    """Silent runs (seconds) with sound on both sides, inside [start, end] of the audio."""
    db = frames_db(audio, rate)
    if not len(db):
        return []
    loud = db >= np.percentile(db, 95) - SILENCE_DB
    a, b = int(start / FRAME), len(db) if end is None else min(len(db), int(np.ceil(end / FRAME)))
    voiced = np.flatnonzero(loud[a:b]) + a
    if len(voiced) < 2:
        return []
    runs, first, last, i = [], voiced[0], voiced[-1], voiced[0]
    while i <= last:
        if not loud[i]:
            j = i
            while not loud[j]:
                j += 1
            runs.append((i * FRAME, j * FRAME))
            i = j
        i += 1
    return [(s, e) for s, e in runs if s > first * FRAME]


def longest_gap(audio: np.ndarray, rate: int, spans: list[tuple[float, float]]) -> tuple[float, float]:
    """The longest silence inside any of `spans` (sentences): (its length, where it starts)."""
    best = (0.0, 0.0)
    for s, e in spans:
        for a, b in silences(audio, rate, s, e):
            best = max(best, (b - a, a))
    return best


def key(word: str) -> str:
    return listening.normalise(word).replace(" ", "")


def onset(start: float, runs: list[tuple[float, float]]) -> float:
    """Whisper's start of a word, moved to the end of a silence it falls in: after a long pause Whisper
    tends to start the next word early, inside the silence, where nothing is heard yet."""
    return next((b for a, b in runs if a <= start < b), start)


@dataclass
class Timed:
    """A caption word matched to the word Whisper heard (by normalised text, in order)."""

    raw: float  # our start minus Whisper's, as Whisper gives it
    off: float  # the same against Whisper's start moved out of a silence (the figures)
    word: str
    index: int  # in the captions
    whisper: float  # Whisper's start, moved out of a silence
    verdict: str = ""  # for an outlier, whose start the cut test found right: "ours", "whisper" or "neither"


def start_differences(captions: list[dict], heard: list, runs: list[tuple[float, float]]) -> list[Timed]:
    """Each caption word's start against Whisper's for the same word."""
    ours = [(i, w) for i, w in enumerate(captions) if key(w["text"])]
    theirs = [w for w in heard if key(w.text)]
    matcher = SequenceMatcher(None, [key(w["text"]) for _, w in ours], [key(w.text) for w in theirs], autojunk=False)
    out = []
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            index, word = ours[block.a + k]
            whisper = float(theirs[block.b + k].start)
            moved = onset(whisper, runs)
            out.append(Timed(word["start"] - whisper, word["start"] - moved, word["text"], index, moved))
    return out


OUTLIER = 0.15  # seconds: the p95 target; words further from Whisper's start get the cut test


def cut_test(audio: np.ndarray, rate: int, captions: list[dict], timed: list[Timed], size: str) -> None:
    """Whose start is right where ours and Whisper's differ by more than OUTLIER: the audio is cut at
    each of the two starts and Whisper hears what follows; a start is right when the first word heard
    after it is the word (and what the captions say comes next, compared as `canonical` reads both, so
    "sixty five thousand dollars" meets "$65,000"). Whisper's word timestamps come from its attention,
    and drift over a "word" it writes for several spoken ones ("$50,000" for "fifty thousand dollars")."""
    for t in timed:
        if abs(t.off) <= OUTLIER:
            continue
        said = canonical(" ".join(w["text"] for w in captions[t.index :])).split()
        right = []
        for at in (captions[t.index]["start"], t.whisper):
            rest = audio[int(max(0.0, at) * rate) :]
            heard = canonical(listening.hear(rest, rate, size).text).split()
            right.append(bool(said and heard and heard[0] == said[0]))
        t.verdict = {(True, False): "ours", (False, True): "whisper"}.get(tuple(right), "neither")


def strip_tags(ssml: str) -> str:
    return re.sub(r"<[^>]+>", " ", ssml)


def spoken_words(text: str) -> list[str]:
    return [w for w in text.split() if any(c.isalnum() for c in w)]


def breaks(item: Item, take: Take) -> list[tuple[float, float, float]]:
    """Each SSML break: (asked, the captions' gap, heard) seconds. It lies between the caption words
    before and after it (counted in the document's text); heard is the longest silent run between them."""
    words = [w for s in take.segments for w in s.get("words") or ()]
    out = []
    for m in re.finditer(r"<break\b([^>]*)/>", item.text):
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        asked = BREAK_STRENGTHS.get(attrs.get("strength", ""), 0.0)
        if "time" in attrs:
            value = attrs["time"]
            asked = float(value[:-2]) / 1000 if value.endswith("ms") else float(value[:-1])
        before = spoken_words(strip_tags(item.text[: m.start()]))
        n = len(before)
        if not 0 < n < len(words) or key(words[n - 1]["text"]) != key(before[-1]):
            out.append((asked, float("nan"), float("nan")))
            continue
        left, right = words[n - 1]["end"], words[n]["start"]
        runs = [r for r in silences(take.audio, take.rate) if r[0] <= right + 0.05 and r[1] >= left - 0.05]
        out.append((asked, right - left, max((b - a for a, b in runs), default=0.0)))
    return out


def marks(item: Item, take: Take, heard: list) -> list[float]:
    """Each mark's time minus Whisper's start of the word after it."""
    out = []
    for s in take.segments:
        for mark in s.get("marks", ()):
            after = item.text.split(f'<mark name="{mark["name"]}"/>', 1)[1]
            word = key(strip_tags(after).split()[0])
            near = [float(w.start) for w in heard if key(w.text) == word and abs(float(w.start) - mark["time"]) < 1.5]
            if near:
                out.append(mark["time"] - min(near, key=lambda t: abs(t - mark["time"])))
    return out


# The takes: what each path made of each item.


@dataclass
class Take:
    item: Item
    audio: np.ndarray
    rate: int = RATE
    segments: list[dict] = field(default_factory=list)  # captions: text, start, end, words, marks
    cache: str | None = None
    seconds: float = 0.0  # the request's wall time
    note: str = ""  # what the engine read (the engine path)


def read_wav(data: bytes) -> tuple[np.ndarray, int]:
    """A WAV body, streamed ones too (their header says "unknown length")."""
    rate = int.from_bytes(data[24:28], "little")
    at = data.index(b"data") + 8
    body = data[at : at + (len(data) - at) // 2 * 2]
    return listening.pcm16(body), rate


class Service:
    """Requests to this service's stack."""

    def __init__(self, stack: Stack):
        import httpx

        log = stack.tmp / "worker-bench0.log"
        loaded = [line for line in log.read_text(errors="replace").splitlines() if "model loaded" in line]
        print(f"worker: {loaded[-1][-220:] if loaded else '(no load line in its log)'}", flush=True)
        self.stack = stack
        self.base = stack.base_url
        self.key = stack.key
        self.http = httpx.Client(
            base_url=f"{self.base}/v1", headers={"Authorization": f"Bearer {self.key}"}, timeout=900
        )
        self.lexicon = ""

    def body(self, item: Item, **extra) -> dict:
        return {"model": "kokoro", "voice": item.voice, "input": item.text, **extra}

    def rest(self, item: Item, fmt: str = "pcm", **extra) -> Take:
        started = time.perf_counter()
        r = self.http.post("/audio/speech", json=self.body(item, response_format=fmt, **extra))
        r.raise_for_status()
        audio, rate = read_wav(r.content) if fmt == "wav" else (listening.pcm16(r.content), RATE)
        return Take(item, audio, rate, cache=r.headers.get("x-cache"), seconds=time.perf_counter() - started)

    def stream(self, item: Item) -> Take:
        started, pcm = time.perf_counter(), bytearray()
        with self.http.stream("POST", "/audio/speech", json=self.body(item, response_format="pcm")) as r:
            r.raise_for_status()
            for chunk in r.iter_bytes():
                pcm += chunk
            cache = r.headers.get("x-cache")
        return Take(item, listening.pcm16(bytes(pcm)), cache=cache, seconds=time.perf_counter() - started)

    def sse(self, item: Item) -> Take:
        started, pcm, segments = time.perf_counter(), bytearray(), []
        body = self.body(item, response_format="pcm", stream_format="sse")
        with self.http.stream("POST", "/audio/speech", json=body) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event["type"] == "speech.audio.delta":
                    pcm += base64.b64decode(event["audio"])
                elif event["type"] == "speech.audio.segment":
                    segments.append(event)
            cache = r.headers.get("x-cache")
        return Take(
            item, listening.pcm16(bytes(pcm)), segments=segments, cache=cache, seconds=time.perf_counter() - started
        )

    def job(self, item: Item) -> Take:
        started = time.perf_counter()
        r = self.http.post("/jobs", json=self.body(item, response_format="pcm"))
        r.raise_for_status()
        job_id = r.json()["id"]
        while (status := self.http.get(f"/jobs/{job_id}").json()["status"]) in ("queued", "running"):
            time.sleep(0.2)
        if status != "succeeded":
            raise RuntimeError(f"job {job_id} {status}")
        audio = self.http.get(f"/jobs/{job_id}/audio").content
        captions = self.http.get(f"/jobs/{job_id}/captions", params={"format": "json"}).json()["segments"]
        return Take(item, listening.pcm16(audio), segments=captions, seconds=time.perf_counter() - started)

    def socket(self, items: list[Item], version: str) -> list[Take]:
        import websockets

        async def run() -> list[Take]:
            url = self.base.replace("http://", "ws://") + "/v1/audio/stream"
            headers = {"Authorization": f"Bearer {self.key}"}
            takes = []
            async with websockets.connect(url, additional_headers=headers, subprotocols=[version]) as ws:
                assert json.loads(await ws.recv())["type"] == "ready"
                for n, item in enumerate(items):
                    started, uid = time.perf_counter(), f"u{n}"
                    if version == "tts.v1":
                        await ws.send(json.dumps({"type": "synthesize", "id": uid, **self.ws_fields(item)}))
                    else:
                        await ws.send(json.dumps({"type": "begin", "id": uid, **self.ws_fields(item, text=False)}))
                        for word in item.text.split(" "):
                            await ws.send(json.dumps({"type": "text", "id": uid, "text": word + " "}))
                        await ws.send(json.dumps({"type": "close", "id": uid}))
                    pcm, cached = bytearray(), None
                    while True:
                        frame = await asyncio.wait_for(ws.recv(), 600)
                        if isinstance(frame, bytes):
                            pcm += frame
                            continue
                        message = json.loads(frame)
                        if message["type"] == "start":
                            cached = "hit" if message.get("cached") else "miss"
                        elif message["type"] == "error":
                            raise RuntimeError(message)
                        elif message["type"] == "end":
                            break
                    takes.append(
                        Take(
                            item,
                            listening.pcm16(bytes(pcm)),
                            segments=message.get("segments", []),
                            cache=cached,
                            seconds=time.perf_counter() - started,
                        )
                    )
            return takes

        return asyncio.run(run())

    def ws_fields(self, item: Item, text: bool = True) -> dict:
        fields = {"model": "kokoro", "voice": item.voice, "format": "pcm"}
        return {**fields, "text": item.text} if text else fields

    def together(self, items: list[Item], n: int) -> list[Take]:
        """Groups of `n` REST requests released together."""
        takes: list[Take | None] = [None] * len(items)
        for first in range(0, len(items), n):
            group = list(enumerate(items[first : first + n], first))
            gate = threading.Barrier(len(group))

            def one(i: int, item: Item, gate: threading.Barrier) -> None:
                gate.wait()
                takes[i] = self.rest(item)

            threads = [threading.Thread(target=one, args=(*pair, gate)) for pair in group]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return [t for t in takes if t is not None]

    def make_lexicon(self) -> None:
        entries = [{"text": t, "alias": a} for t, a in lexicon_entries()]
        r = self.http.post("/lexicons", json={"name": "intelligibility", "entries": entries})
        r.raise_for_status()
        self.lexicon = r.json()["id"]

    def batch_rows(self) -> tuple[float, float]:
        return (
            sum(self.stack.worker_metric("tts_worker_batch_rows_sum")),
            sum(self.stack.worker_metric("tts_worker_batch_rows_count")),
        )

    def run(self, path: str, items: list[Item]) -> list[Take]:
        if path == "rest":
            return [self.rest(i, "wav") for i in items]
        if path == "stream":
            return [self.stream(i) for i in items]
        if path in ("sse", "ssml"):
            return [self.sse(i) for i in items]
        if path in ("ws1", "ws2"):
            return self.socket(items, "tts.v1" if path == "ws1" else "tts.v2")
        if path in ("job", "long"):
            return [self.job(i) for i in items]
        if path.startswith("batch"):
            before = self.batch_rows()
            takes = self.together(items, int(path[5:]))
            rows, batches = (a - b for a, b in zip(self.batch_rows(), before, strict=True))
            print(f"   {path}: {batches:.0f} batches, {rows / max(batches, 1):.2f} rows a batch", flush=True)
            return takes
        if path.startswith("speed"):
            return [self.rest(i, speed=float(path[5:])) for i in items]
        if path == "lexicon":
            return [self.rest(i, lexicons=[self.lexicon]) for i in items]
        if path == "lexicon-off" or path in PRECISIONS:
            return [self.rest(i) for i in items]
        raise ValueError(path)


class Engine:
    """KokoroEngine in this process: the sentence as one segment, as the engine reads it."""

    def __init__(self, precision: str = "auto"):
        from inference.kokoro.engine import KokoroEngine
        from inference.kokoro.params import KokoroParams

        self.engine = KokoroEngine.load(str(CHECKPOINT), device="cpu", precision=precision)
        self.engine.warm_up()
        self.params = KokoroParams(voice=((VOICE, 1.0),))

    def run(self, items: list[Item], speed: float = 1.0) -> list[Take]:
        from inference.engine import SynthesisRequest

        takes = []
        for item in items:
            params = replace(self.params, voice=((item.voice, 1.0),), speed=speed)
            started = time.perf_counter()
            text = self.engine.read(item.text, params)
            pieces = list(self.engine.synthesize(SynthesisRequest([text], params)))
            audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
            takes.append(Take(item, audio, seconds=time.perf_counter() - started, note=text))
        return takes

    def run_onnx(self, items: list[Item]) -> list[Take]:
        """The same phonemes and style through the int8 ONNX graph, piece by piece."""
        import onnxruntime
        import torch

        from inference.kokoro import real_weights
        from inference.kokoro.engine import _row_pieces

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        session = onnxruntime.InferenceSession(real_weights.onnx_bytes(), options, providers=["CPUExecutionProvider"])
        takes = []
        for item in items:
            started = time.perf_counter()
            params = replace(self.params, voice=((item.voice, 1.0),))
            text = self.engine.read(item.text, params)
            audio = []
            for piece in _row_pieces(text, params):
                ids = [self.engine.model.vocab[c] for c in piece.phonemes if c in self.engine.model.vocab]
                style = self.engine.style(params.voice, len(ids)).cpu().numpy().reshape(1, 256)
                feeds = {"tokens": np.array([[0, *ids, 0]], np.int64), "style": style.astype(np.float32)}
                feeds["speed"] = np.array([1.0], np.float32)
                audio.append(session.run(None, feeds)[0].reshape(-1) / 1.5)  # its ISTFT is 1.5x louder
            take = np.concatenate(audio) if audio else np.zeros(0, np.float32)
            takes.append(Take(item, take, seconds=time.perf_counter() - started, note=text))
        return takes


class PeerClient:
    """The peer's OpenAI endpoint and its captioned speech (word timestamps)."""

    def __init__(self, base_url: str):
        import httpx

        self.http = httpx.Client(base_url=base_url, timeout=900)

    def body(self, item: Item) -> dict:
        # lang_code "a": the peer reads a voice's text in the language of its id's first letter unless told;
        # this service reads Latin script in English whatever the voice.
        return {"model": "kokoro", "voice": item.voice, "input": item.text, "response_format": "pcm", "stream": False,
                "lang_code": "a"}  # fmt: skip

    def run(self, path: str, items: list[Item]) -> list[Take]:
        takes = []
        for item in items:
            started = time.perf_counter()
            if path != "peer-timings":
                speed = float(path[4:] or 1)
                r = self.http.post("/v1/audio/speech", json={**self.body(item), "speed": speed})
                r.raise_for_status()
                takes.append(Take(item, listening.pcm16(r.content), seconds=time.perf_counter() - started))
                continue
            r = self.http.post("/dev/captioned_speech", json={**self.body(item), "return_timestamps": True})
            r.raise_for_status()
            answer = r.json()
            words = [{"text": w["word"], "start": w["start_time"], "end": w["end_time"]} for w in answer["timestamps"]]
            audio = listening.pcm16(base64.b64decode(answer["audio"]))
            takes.append(Take(item, audio, segments=[{"words": words}], seconds=time.perf_counter() - started))
        return takes


# Hearing and the figures.


@dataclass
class Heard:
    take: Take
    hypothesis: str
    errors: int
    words: int
    plain: int
    gap: float  # the longest silence inside a sentence
    gap_words: str  # the words either side of it, as Whisper heard them
    starts: list[Timed]
    marks: list[float] = field(default_factory=list)
    breaks: list[tuple[float, float, float]] = field(default_factory=list)


def around(words: list, at: float) -> str:
    before = [w.text for w in words if float(w.end) <= at + 0.05][-1:]
    after = [w.text for w in words if float(w.start) >= at - 0.05][:1]
    return f"{' '.join(before) or '^'} | {' '.join(after) or '$'}"


def hear(take: Take, size: str) -> list[Heard]:
    """Whisper on a take; the long text in clips of up to ~25 s, cut halfway between caption segments."""
    if take.item.set != "long":
        return [hear_clip(take, take.audio, take.item.refs, take.segments, size)]
    segments, out = take.segments, []
    cuts = (
        [0.0]
        + [(s["end"] + n["start"]) / 2 for s, n in zip(segments, segments[1:], strict=False)]
        + [len(take.audio) / RATE]
    )
    first = 0
    for last in range(len(segments)):
        if last + 1 < len(segments) and segments[last + 1]["end"] - segments[first]["start"] <= 25:
            continue
        a, b = cuts[first], cuts[last + 1]
        clip = take.audio[int(a * RATE) : int(b * RATE)]
        group = [{**s, "start": s["start"] - a, "end": s["end"] - a} for s in segments[first : last + 1]]
        group = [{**s, "words": [{**w, "start": w["start"] - a} for w in s.get("words") or ()]} for s in group]
        ref = " ".join(s["text"] for s in group)
        out.append(hear_clip(Take(Item("long", ref, (ref,)), clip, segments=group), clip, (ref,), group, size))
        first = last + 1
    return out


def hear_clip(take: Take, audio: np.ndarray, refs, segments, size: str) -> Heard:
    heard = listening.hear(audio, take.rate, size, words=True)
    errs, words, plain = score(refs, heard.text)
    if take.item.set == "ssml":
        spans: list[tuple[float, float]] = []
    elif take.item.set == "long":
        spans = [(s["start"], s["end"]) for s in segments]
    else:
        spans = [(0.0, len(audio) / take.rate)]
    gap, at = longest_gap(audio, take.rate, spans)
    captions = [w for s in segments for w in s.get("words") or ()]
    result = Heard(take, heard.text, errs, words, plain, gap, around(list(heard.words), at) if gap else "", [])
    runs = silences(audio, take.rate)
    result.starts = start_differences(captions, list(heard.words), runs) if captions else []
    cut_test(audio, take.rate, captions, result.starts, size)
    if take.item.set == "ssml":
        result.marks = marks(take.item, take, list(heard.words))
        result.breaks = breaks(take.item, take)
    return result


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def row(path: str, name: str, results: list[Heard], wall: float) -> dict:
    errs, words, plain = (sum(getattr(r, f) for r in results) for f in ("errors", "words", "plain"))
    # Whisper sometimes loops on a phrase ("the gold medal of the gold medal of..."): its insertions would
    # outweigh everything else, so such items are counted and the WER is also given with each item's
    # errors capped at its reference words (an item at worst all wrong).
    loops = sum(len(r.hypothesis.split()) > 3 * r.words + 10 for r in results)
    capped = sum(min(r.errors, r.words) for r in results)
    gaps = [r.gap for r in results if r.take.item.set != "ssml"]
    starts = [abs(t.off) for r in results for t in r.starts]
    raw = [abs(t.raw) for r in results for t in r.starts]
    # Where the cut test found Whisper's start wrong and ours right, Whisper is no reference for that word.
    judged = [abs(t.off) for r in results for t in r.starts if t.verdict != "ours"]
    verdicts = [t.verdict for r in results for t in r.starts if t.verdict]
    caches = sorted({str(r.take.cache) for r in results if r.take.cache is not None})
    audio = sum(len(r.take.audio) / r.take.rate for r in results)
    return {
        "path": path,
        "set": name,
        "items": len(results),
        "words": words,
        "wer": 100 * errs / max(words, 1),
        "plain": 100 * plain / max(words, 1),
        "loops": loops,
        "capped": 100 * capped / max(words, 1),
        "gap_p50": pct(gaps, 50),
        "gap_p95": pct(gaps, 95),
        "gap_max": max(gaps, default=float("nan")),
        "timed": len(starts),
        "start_p50": 1000 * pct(starts, 50),
        "start_p95": 1000 * pct(starts, 95),
        "raw_p50": 1000 * pct(raw, 50),
        "raw_p95": 1000 * pct(raw, 95),
        "bias": 1000 * statistics.median([t.off for r in results for t in r.starts]) if starts else float("nan"),
        "outliers": len(verdicts),
        "ours_right": verdicts.count("ours"),
        "whisper_right": verdicts.count("whisper"),
        "judged_p95": 1000 * pct(judged, 95),
        "cache": ",".join(f"{c} {sum(str(r.take.cache) == c for r in results)}" for c in caches) or "-",
        "audio": audio,
        "wall": wall,
    }


def table(rows: list[dict]) -> None:
    print("\n| path | set | items | words | WER | WER, normaliser alone | gap p50 / p95 / max (s) | timed words | "
          "start error p50 / p95 (ms) | bias (ms) | against Whisper's own starts (ms) | starts > 150 ms off: "
          "ours right / Whisper's / neither; p95 without Whisper's wrong (ms) | x-cache | audio (s) | "
          "wall (s) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        timing = f"{r['start_p50']:.0f} / {r['start_p95']:.0f}" if r["timed"] else "-"
        raw = f"{r['raw_p50']:.0f} / {r['raw_p95']:.0f}" if r["timed"] else "-"
        gaps = "-" if np.isnan(r["gap_max"]) else f"{r['gap_p50']:.2f} / {r['gap_p95']:.2f} / {r['gap_max']:.2f}"
        bias = f"{r['bias']:+.0f}" if r["timed"] else "-"
        neither = r["outliers"] - r["ours_right"] - r["whisper_right"]
        cut = f"{r['ours_right']} / {r['whisper_right']} / {neither}; {r['judged_p95']:.0f}" if r["timed"] else "-"
        wer = f"{r['wer']:.1f} %"
        if r["loops"]:
            wer += f" ({r['capped']:.1f} % capped; Whisper looped on {r['loops']})"
        print(
            f"| {r['path']} | {r['set']} | {r['items']} | {r['words']} | {wer} | {r['plain']:.1f} % | "
            f"{gaps} | {r['timed'] or '-'} | {timing} | "
            f"{bias} | {raw} | {cut} | {r['cache']} | {r['audio']:.0f} | {r['wall']:.0f} |"
        )


def details(path: str, results: list[Heard], worst: int) -> None:
    ranked = sorted(results, key=lambda r: (-r.errors, r.take.item.text))
    for r in ranked[:worst]:
        if not r.errors:
            break
        voice = f" ({r.take.item.voice})" if r.take.item.voice != VOICE else ""
        print(f"   [{path}] {r.errors} errors{voice}: {r.take.item.refs[-1]!r}\n      heard: {r.hypothesis!r}")
        if r.take.note:
            print(f"      read:  {r.take.note!r}")
    longest = max(results, key=lambda r: r.gap)
    if longest.gap:
        text = longest.take.item.text[:70]
        print(f"   [{path}] longest gap {longest.gap:.2f} s between {longest.gap_words!r} in {text!r}")
    for r in results:
        for asked, said, got in r.breaks:
            text = r.take.item.text[:60]
            print(
                f"   [{path}] break {asked:.2f} s asked, captions {said:.2f} s, {got:.2f} s of silence heard: {text!r}"
            )
        for d in r.marks:
            print(f"   [{path}] mark {1000 * d:+.0f} ms from the word after it: {r.take.item.text[:60]!r}")


def record(path: str, name: str, r: Heard) -> dict:
    item, take = r.take.item, r.take
    return {
        **{"path": path, "set": name, "voice": item.voice, "text": item.text[:300], "reference": item.refs[-1][:300]},
        **{"heard": r.hypothesis, "errors": r.errors, "words": r.words, "plain": r.plain, "read": take.note},
        **{"gap": r.gap, "gap_words": r.gap_words, "marks": r.marks, "breaks": r.breaks},
        "starts": [(t.raw, t.off, t.word, t.verdict) for t in r.starts],
        "cache": take.cache,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", nargs="+", default=DEFAULT_PATHS, choices=list(PATHS))
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--limit", type=int, default=0, help="the first N items of each set (0: all)")
    parser.add_argument("--repeat", type=int, default=1, help="each path's requests this many times")
    parser.add_argument("--whisper", default="base", help="Whisper's size: base (the figures) or tiny.en")
    parser.add_argument("--peer-start", default="", help="shell command starting the peer, with {port}")
    parser.add_argument("--worst", type=int, default=3, help="items with most errors printed per path and set")
    parser.add_argument("--save", default="", help="write every item's transcript and figures here (JSON)")
    parser.add_argument(
        "--voices", nargs="+", default=[VOICE], choices=VOICES,
        help="each set spoken in each of these voices, scored as one corpus (more words: a steadier WER)",
    )  # fmt: skip
    args = parser.parse_args()
    import django

    django.setup()
    for name in ("httpx", "faster_whisper"):  # their per-request lines would bury the figures
        logging.getLogger(name).setLevel(logging.WARNING)
    started = time.perf_counter()
    sets = {name: load(name)[: args.limit or None] for name in args.sets}
    sets = {name: [replace(i, voice=v) for v in args.voices for i in items] for name, items in sets.items()}
    for name, items in sets.items():
        words = sum(len(canonical(i.refs[-1]).split()) for i in items)
        print(f"set {name}: {len(items)} items, {words} words (spoken reference, canonical)")
    listening.whisper(args.whisper)  # loaded once, before anything is timed
    rows: list[dict] = []
    saved: list[dict] = []

    def measure(path: str, run) -> None:
        for name in PATHS[path]:
            if name not in sets:
                continue
            items = sets[name] * args.repeat
            t0 = time.perf_counter()
            try:
                takes = run(path, items)
            except Exception as exc:  # one path's failure is reported, the others still measured
                print(f"{path} / {name} FAILED: {exc!r}", flush=True)
                continue
            wall = time.perf_counter() - t0
            t1 = time.perf_counter()
            results = [h for take in takes for h in hear(take, args.whisper)]
            heard = time.perf_counter() - t1
            print(f"{path} / {name}: {len(takes)} takes in {wall:.0f} s, heard in {heard:.0f} s", flush=True)
            rows.append(row(path, name, results, wall))
            table(rows[-1:])
            details(path, results, args.worst)
            saved.extend(record(path, name, r) for r in results)

    env = {"TTS_MAX_BATCH": "8", "TTS_CACHE_MAX_ENTRY_BYTES": "1"}
    on_service = [p for p in args.paths if p in SERVICE]
    if on_service:
        with Stack(str(CHECKPOINT), engine="kokoro", **env) as stack:
            service = Service(stack)
            service.make_lexicon()
            print(f"service: {stack.base_url}, {env}, ready after {time.perf_counter() - started:.0f} s", flush=True)
            for path in on_service:
                measure(path, service.run)
    engine_paths = [p for p in args.paths if p.startswith("engine")]
    for precision in ("auto", *PRECISIONS):  # one engine loaded at a time
        paths = [p for p in engine_paths if p.endswith(precision) or (precision == "auto" and "-" not in p)]
        onnx = precision == "auto" and "onnx" in args.paths  # the float32 engine's phonemes and styles
        if paths or onnx:
            engine = Engine(precision)
            for path in paths:
                measure(path, lambda path, items, e=engine: e.run(items, float(path[6:].partition("-")[0] or 1)))
            if onnx:
                measure("onnx", lambda path, items, e=engine: e.run_onnx(items))
            del engine
    for precision in PRECISIONS:
        if precision in args.paths:
            with Stack(str(CHECKPOINT), engine="kokoro", TTS_PRECISION=precision, **env) as stack:
                measure(precision, Service(stack).run)
    peer_paths = [p for p in args.paths if p.startswith("peer")]
    if peer_paths and args.peer_start:
        from kokoro_peer import Peer

        log = Path(os.environ.get("TMPDIR", "/tmp")) / "intelligibility-peer.log"
        peer = Peer(args.peer_start, log)
        try:
            client = PeerClient(f"http://127.0.0.1:{peer.port}")
            for path in peer_paths:
                measure(path, client.run)
        finally:
            peer.close()
    elif peer_paths:
        print("peer paths skipped: no --peer-start")
    print("\nall figures:")
    table(rows)
    if args.save:
        Path(args.save).write_text(json.dumps({"rows": rows, "items": saved}, indent=1, default=float))
    print(f"\nwhole run: {time.perf_counter() - started:.0f} s (Whisper {args.whisper})")


if __name__ == "__main__":
    main()
