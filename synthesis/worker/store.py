"""A finished asynchronous job's file: its spooled audio encoded a block at a time (a long job's
audio is never all in memory) and saved with Django's storage, or held in Redis for a zero-retention
job (`synthesis.audio.held`)."""

from __future__ import annotations

import shutil
import tempfile
from typing import IO

from django.core.files import File

from synthesis.audio.formats import StreamEncoder, output_format, wav_header
from synthesis.audio.held import hold_audio
from synthesis.models import Job

BLOCK_BYTES = 1024 * 1024  # read back and encoded this much at a time


def store(job: Job, pcm: IO[bytes], rate: int) -> None:
    """`pcm` (16-bit mono at `rate`, the job's audio as published) as the job's file in its
    format; a zero-retention job's is held in Redis instead, until its first download (at most
    TTS_ZERO_RETENTION_HOLD_SECONDS), never on disk (the encoder's temporary files have no name)."""
    spec = output_format(job.response_format)
    with tempfile.TemporaryFile() as body, tempfile.TemporaryFile() as whole:
        raw = f"pcm_{spec.sample_rate}" if spec.codec == "wav" else job.response_format  # WAV: its header after
        encoder = StreamEncoder(raw, rate)
        pcm.seek(0)
        while block := pcm.read(BLOCK_BYTES):
            body.write(encoder.feed(block))
        body.write(encoder.finish())
        out = body
        if spec.codec == "wav":  # a stored WAV says its sizes (past RIFF's 4 GiB: "unknown")
            samples = body.tell() // 2
            whole.write(wav_header(samples if samples * 2 + 36 < 2**32 else None, spec.sample_rate))
            body.seek(0)
            shutil.copyfileobj(body, whole)
            out = whole
        out.seek(0)
        if job.zero_retention:
            hold_audio(job.id, out.read())
        else:
            job.result.save(f"{job.id}.{spec.extension}", File(out), save=False)
