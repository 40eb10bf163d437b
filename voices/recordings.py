"""Voices made from a reference recording (engines whose spec has `recording_voices`: ChatTTS's
zero-shot speaker, VoxCPM2's clone): the upload is checked and decoded here (24 kHz mono), kept in
Redis for an hour, and encoded by a worker of the voice's model
(`synthesis.tasks.encode_voice_recording`); the voice is `processing` until then, `ready` or
`failed` after. Making one needs the creator's consent statement (`CONSENT_STATEMENT`)."""

from __future__ import annotations

import io

import av
import numpy as np
from rest_framework import serializers

from inference.spec import SAMPLE_RATE, EngineSpec
from inference.text.preparation import TextError
from tts_saas.errors import ApiError
from tts_saas.queueing import send
from tts_saas.redis import get_redis

from .models import Voice

# What the creator of a voice from a recording states (the API's `consent: true`, the dashboard's
# box); kept with the voice, as shown, with who and when, and in the audit log.
CONSENT_STATEMENT = (
    "I have the consent of the person whose voice this is to make a copy of it, and the right to use "
    "that voice for the speech this service will make with it."
)
RECORDING_KEY = "tts:voice_recording:{}"  # the decoded recording, for the worker to encode (an hour)
ENCODE_VOICE = "synthesis.tasks.encode_voice_recording"


class _Refused(ValueError):
    """A recording refused, with the message for people."""


def decode_recording(data: bytes, min_seconds: float, max_seconds: float) -> np.ndarray:
    """An uploaded recording (any container and codec FFmpeg reads: wav, mp3, flac, ogg/opus,
    m4a/aac, webm) as mono float32 at 24 kHz, resampled by libswresample; ValueError with a message
    for people when it is not audio, too short or too long, below 8 kHz, or silent."""
    unreadable = "The file is not audio FFmpeg can read (wav, mp3, flac, ogg, m4a, webm)."
    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.audio:
                raise _Refused("The file has no audio.")
            stream = container.streams.audio[0]
            if stream.codec_context is None:  # a header FFmpeg has no decoder for (0 bits per sample, …)
                raise _Refused(unreadable)
            if (stream.codec_context.sample_rate or 0) < 8000:
                raise _Refused("The recording's sample rate is below 8 kHz.")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
            parts: list[np.ndarray] = []
            for frame in container.decode(stream):  # type: ignore[union-attr]  # av.open of bytes: an input
                parts += [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
                if sum(len(p) for p in parts) > (max_seconds + 1) * SAMPLE_RATE:
                    break
            parts += [f.to_ndarray().reshape(-1) for f in resampler.resample(None)]
    except _Refused:  # ours, above, with its message
        raise
    except Exception as exc:  # bytes from anyone: whatever FFmpeg or PyAV raise on them (some of their
        raise _Refused(unreadable) from exc  # errors are ValueErrors, UnicodeDecodeError too), it is not audio
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    if not np.isfinite(samples).all():
        raise _Refused(unreadable)
    seconds = len(samples) / SAMPLE_RATE
    if not min_seconds <= seconds <= max_seconds:
        raise _Refused(f"The recording is {seconds:.1f} s long; use {min_seconds:g} to {max_seconds:g} s.")
    if float(np.abs(samples).max()) < 1e-3:
        raise _Refused("The recording is silent.")
    return samples.astype(np.float32)


def check_transcript(transcript: str, spec: EngineSpec) -> str:
    """What the recording says, checked for the model (it is spoken with the voice's every row);
    "" where the model clones without one."""
    if not transcript.strip():
        if spec.transcript_required:
            raise serializers.ValidationError(f"{spec.title} needs what the recording says.")
        return ""
    if any(tag in transcript for tag in ("[Stts]", "[spk_emb]", "[empty_spk]", "[Ptts]")):
        raise serializers.ValidationError("The transcript holds a ChatTTS control token.")
    try:
        spec.prepare(transcript)
    except TextError as exc:
        raise serializers.ValidationError(str(exc)) from None
    return " ".join(transcript.split())


def decode_upload(upload, spec: EngineSpec) -> np.ndarray:
    """The uploaded recording, decoded (400 when it is not a usable recording for the model)."""
    try:
        return decode_recording(upload.read(), *spec.recording_seconds)
    except ValueError as exc:
        raise ApiError(400, f"audio: {exc}", "invalid_value", "audio") from None


def start_encoding(voice: Voice, spec: EngineSpec, recording: np.ndarray) -> None:
    """Keep the decoded recording for a worker of the voice's model and send that worker the task
    (at the front of its queue)."""
    pcm = (np.clip(recording, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    get_redis().set(RECORDING_KEY.format(voice.id), pcm, ex=3600)
    send(ENCODE_VOICE, voice.id, queue=spec.queue_name, priority=0, expires=3600)
