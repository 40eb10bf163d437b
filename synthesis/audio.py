"""Audio encoding for `response_format`: wav, pcm (raw 24 kHz 16-bit LE mono), mp3, opus (Ogg),
aac (ADTS) and flac, with PyAV's bundled FFmpeg; no system libraries needed. `encode` makes a
whole file; `StreamEncoder` turns PCM chunks into bytes that can be sent as they come."""

from __future__ import annotations

import struct

import av
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
    """Encode mono 16-bit little-endian PCM into a whole `fmt` file."""
    if fmt == "pcm":
        return pcm16
    if fmt == "wav":
        return wav_header(len(pcm16) // 2, sample_rate) + pcm16
    encoder = StreamEncoder(fmt, sample_rate)
    return encoder.feed(pcm16) + encoder.finish()


class _Sink:
    """A write-only file for PyAV: no seek, so muxers write as they go (streamable output)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data) -> int:
        self.buffer += bytes(data)
        return len(data)

    def drain(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


class StreamEncoder:
    """Encodes PCM chunks as they arrive; `feed` and `finish` return the bytes ready to send.
    WAV gets a header whose sizes say "unknown", as streamed WAV does."""

    def __init__(self, fmt: str, sample_rate: int = SAMPLE_RATE):
        self.fmt = fmt
        self.sample_rate = sample_rate
        self._started = False
        if fmt in ("pcm", "wav"):
            return
        container_name, codec, rate, bit_rate = _AV[fmt]
        self._sink = _Sink()
        options = {"page_duration": "100000"} if container_name == "ogg" else {}  # Ogg pages every 0.1 s
        self._container = av.open(self._sink, mode="w", format=container_name, options=options)
        self._stream = self._container.add_stream(codec, rate=rate, layout="mono")
        if bit_rate:
            self._stream.bit_rate = bit_rate
        self._resampler = av.AudioResampler(
            format=self._stream.codec_context.format.name,
            layout="mono",
            rate=rate,
            frame_size=self._stream.codec_context.frame_size or None,
        )
        self._pts = 0

    def _mux(self, frames) -> None:
        for out_frame in frames:
            for packet in self._stream.encode(out_frame):
                self._container.mux(packet)

    def feed(self, pcm16: bytes) -> bytes:
        if self.fmt in ("pcm", "wav"):
            head = b"" if self._started or self.fmt == "pcm" else wav_header(None, self.sample_rate)
            self._started = True
            return head + pcm16
        if not pcm16:
            return b""
        samples = np.frombuffer(pcm16, dtype="<i2").reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = self.sample_rate
        frame.pts = self._pts
        self._pts += frame.samples
        self._mux(self._resampler.resample(frame))
        return self._sink.drain()

    def finish(self) -> bytes:
        if self.fmt in ("pcm", "wav"):
            return b"" if self._started or self.fmt == "pcm" else wav_header(0, self.sample_rate)
        self._mux(self._resampler.resample(None))
        self._mux([None])
        self._container.close()
        return self._sink.drain()
