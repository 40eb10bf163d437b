"""Audio encoding for `response_format`: wav, pcm (raw 24 kHz 16-bit LE mono), mp3, opus (Ogg),
aac (ADTS) and flac, with PyAV's bundled FFmpeg; no system libraries needed."""

from __future__ import annotations

import io
import struct

import numpy as np

SAMPLE_RATE = 24000

CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
FORMATS = tuple(CONTENT_TYPES)

# format -> (container, codec, codec sample rate, bit rate)
_AV = {
    "mp3": ("mp3", "libmp3lame", 24000, 64_000),
    "opus": ("ogg", "libopus", 24000, 48_000),
    "aac": ("adts", "aac", 24000, 64_000),
    "flac": ("flac", "flac", 24000, None),
}


def wav_header(num_samples: int | None, sample_rate: int = SAMPLE_RATE) -> bytes:
    """A 16-bit mono WAV header; with `num_samples=None` the sizes say "unknown" (streaming)."""
    data_size = 0xFFFFFFFF if num_samples is None else num_samples * 2
    riff_size = 0xFFFFFFFF if num_samples is None else 36 + data_size
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data_size)
    )


def encode(pcm16: bytes, fmt: str, sample_rate: int = SAMPLE_RATE) -> bytes:
    """Encode mono 16-bit little-endian PCM into `fmt`."""
    if fmt == "pcm":
        return pcm16
    if fmt == "wav":
        return wav_header(len(pcm16) // 2, sample_rate) + pcm16
    import av

    container_name, codec, rate, bit_rate = _AV[fmt]
    samples = np.frombuffer(pcm16, dtype="<i2").reshape(1, -1)
    buf = io.BytesIO()
    with av.open(buf, mode="w", format=container_name) as container:
        stream = container.add_stream(codec, rate=rate, layout="mono")
        if bit_rate:
            stream.bit_rate = bit_rate
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = sample_rate
        resampler = av.AudioResampler(
            format=stream.codec_context.format.name,
            layout="mono",
            rate=rate,
            frame_size=stream.codec_context.frame_size or None,
        )
        for out_frame in resampler.resample(frame) + resampler.resample(None):
            for packet in stream.encode(out_frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buf.getvalue()
