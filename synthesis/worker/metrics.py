"""The synthesis worker's own Prometheus metrics, served by each worker process on
TTS_WORKER_METRICS_PORT (0: off): what an operator scales on — rows per batch, audio tokens and
seconds per second (by engine), how long jobs waited for a worker, time to first audio, and the accelerator's memory."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

logger = logging.getLogger(__name__)

SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120)

BATCH_ROWS = Histogram(
    "tts_worker_batch_rows", "Rows (segments of jobs) generated together per batch", buckets=(1, 2, 4, 8, 16, 32, 64)
)
AUDIO_TOKENS = Counter(
    "tts_worker_audio_tokens_total",
    "Units the engine generated: ChatTTS audio tokens (46.875 a second of audio), Kokoro frames (40 a second)",
    ["engine"],
)
AUDIO_SECONDS = Counter("tts_worker_audio_seconds_total", "Seconds of audio generated", ["engine"])
QUEUE_WAIT = Histogram(
    "tts_worker_queue_wait_seconds", "Time from a job's submission to a worker taking it", buckets=SECONDS
)
FIRST_AUDIO = Histogram(
    "tts_worker_time_to_first_audio_seconds", "Time from a job's submission to its first audio", buckets=SECONDS
)
VOICE_PROMPTS_BUILT = Gauge(
    "tts_worker_voice_prompts_built",
    "Cloned voices' prompts this worker built (a voice's reference run through its model)",
)
VOICE_PROMPT_BYTES = Gauge("tts_worker_voice_prompt_bytes", "Memory of the cloned voices' prompts this worker keeps")
DEVICE_MEMORY = Gauge("tts_worker_device_memory_bytes", "Accelerator memory held by the model process", ["device"])
DEVICE_UTILISATION = Gauge("tts_worker_device_utilisation_ratio", "Accelerator busy time, 0..1", ["device"])


def serve(port: int) -> None:
    if not port:
        return
    try:
        start_http_server(port)
    except OSError as exc:  # taken (another worker on this host): synthesis goes on without them
        logger.error("worker metrics not served on port %d: %s", port, exc)
        return
    logger.info("worker metrics on port %d", port)


def observe_device(stats: dict[str, float]) -> None:
    """`stats` from the engine: memory_bytes and, where the driver tells, utilisation."""
    device = str(stats.get("device", ""))
    if "memory_bytes" in stats:
        DEVICE_MEMORY.labels(device).set(stats["memory_bytes"])
    if "utilisation" in stats:
        DEVICE_UTILISATION.labels(device).set(stats["utilisation"])


def observe_prompts(counts: tuple[int, int] | None) -> None:
    """The engine's kept voice prompts (`Engine.voice_prompt_counts`), where it keeps them."""
    if counts is not None:
        VOICE_PROMPTS_BUILT.set(counts[0])
        VOICE_PROMPT_BYTES.set(counts[1])
