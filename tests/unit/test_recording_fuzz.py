"""A recording upload is decoded by FFmpeg (PyAV) from bytes a stranger sends: whatever they are, the
decoder answers with audio or with a message for people (ValueError, the API's 400 naming `audio`),
never with another error (a 500). The corpus: real files of every container the docs name, made
here by PyAV, then truncated, with lying headers (WAV: 0 bits per sample, 0 channels, a rate of 0,
huge chunk sizes), polyglots, and noise."""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import pytest

from synthesis.audio.formats import wav_header
from voices.recordings import decode_recording

RATE = 16_000
SECONDS = 1.5


def tone() -> np.ndarray:
    t = np.arange(int(SECONDS * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def wav() -> bytes:
    x = tone()
    return wav_header(len(x), RATE) + (x * 32767).astype("<i2").tobytes()


def encoded(container: str, codec: str, rate: int) -> bytes:
    """The tone in `container` with `codec`, made by PyAV (FFmpeg's own encoders)."""
    out = io.BytesIO()
    with av.open(out, "w", format=container) as box:
        stream = box.add_stream(codec, rate=rate, layout="mono")
        x = tone()
        if rate != RATE:
            x = np.interp(np.arange(int(len(x) * rate / RATE)) * RATE / rate, np.arange(len(x)), x).astype(np.float32)
        fmt = stream.codec_context.format.name
        scale, dtype = {"s16": (32767, np.int16), "s32": (2**31 - 1, np.int32)}.get(fmt.rstrip("p"), (1, np.float32))
        samples = (x * scale).astype(dtype)
        frame_size = stream.codec_context.frame_size or 1024
        for start in range(0, len(samples), frame_size):
            frame = av.AudioFrame.from_ndarray(samples[None, start : start + frame_size], format=fmt, layout="mono")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                box.mux(packet)
        for packet in stream.encode(None):
            box.mux(packet)
    return out.getvalue()


def files() -> dict[str, bytes]:
    made = {"wav": wav()}
    for name, container, codec, rate in (
        ("mp3", "mp3", "libmp3lame", 16_000),
        ("flac", "flac", "flac", 16_000),
        ("ogg", "ogg", "libopus", 48_000),
        ("m4a", "ipod", "aac", 16_000),
        ("webm", "webm", "libopus", 48_000),
    ):
        try:
            made[name] = encoded(container, codec, rate)
        except (av.error.FFmpegError, ValueError) as exc:  # an encoder this FFmpeg build lacks
            pytest.fail(f"PyAV could not make the {name} sample: {exc}")
    return made


def lying_wavs() -> dict[str, bytes]:
    """A WAV's header fields set to what no recording has."""
    good = bytearray(wav())
    out = {}
    for name, offset, fmt, value in (
        ("0 bits per sample", 34, "<H", 0),
        ("7 bits per sample", 34, "<H", 7),
        ("0 channels", 22, "<H", 0),
        ("65535 channels", 22, "<H", 65535),
        ("a rate of 0", 24, "<I", 0),
        ("a rate of 4 GHz", 24, "<I", 0xFFFFFFFF),
        ("a byte rate of 0", 28, "<I", 0),
        ("a block align of 0", 32, "<H", 0),
        ("a RIFF size of 4 GiB", 4, "<I", 0xFFFFFFFF),
        ("a data size of 4 GiB", 40, "<I", 0xFFFFFFFF),
        ("a fmt size of 4 GiB", 16, "<I", 0xFFFFFFFF),
        ("format tag 0", 20, "<H", 0),
        ("format tag float with 16 bits", 20, "<H", 3),
        ("format tag extensible", 20, "<H", 0xFFFE),
    ):
        b = bytearray(good)
        struct.pack_into(fmt, b, offset, value)
        out[name] = bytes(b)
    return out


def corpus() -> dict[str, bytes]:
    made = files()
    cases: dict[str, bytes] = {}
    for name, data in made.items():
        cases[name] = data
        for cut in (4, 12, 44, 100, len(data) // 3, len(data) // 2, len(data) - 7):
            cases[f"{name} cut at {cut}"] = data[:cut]
        flipped = bytearray(data)
        for i in range(8, min(len(flipped), 200), 13):  # the headers' bytes, every 13th inverted
            flipped[i] ^= 0xFF
        cases[f"{name} with its header bytes flipped"] = bytes(flipped)
        cases[f"{name} twice"] = data + data
    cases |= {f"wav with {k}": v for k, v in lying_wavs().items()}
    cases["wav header, mp3 body"] = wav()[:44] + made["mp3"]
    cases["mp3 then a wav"] = made["mp3"] + made["wav"]
    cases["flac magic, noise"] = b"fLaC" + np.random.default_rng(2).bytes(5000)
    cases["OggS magic, noise"] = b"OggS" + np.random.default_rng(3).bytes(5000)
    cases["an ftyp box of 4 GiB"] = struct.pack(">I", 0xFFFFFFFF) + b"ftypisom" + bytes(200)
    cases["EBML magic, noise"] = bytes.fromhex("1a45dfa3") + np.random.default_rng(4).bytes(5000)
    cases["noise"] = np.random.default_rng(5).bytes(20_000)
    cases["empty"] = b""
    cases["a PNG"] = bytes.fromhex("89504e470d0a1a0a") + bytes(100)
    return cases


CORPUS = corpus()


def test_the_corpus_is_made_of_files_ffmpeg_reads():
    for name in ("wav", "mp3", "flac", "ogg", "m4a", "webm"):
        samples = decode_recording(CORPUS[name], 1.0, 15.0)
        assert 1.3 < len(samples) / 24_000 < 1.7, name  # the tone, at 24 kHz


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_any_upload_is_audio_or_a_message_for_people(name):
    try:
        samples = decode_recording(CORPUS[name], 1.0, 15.0)
    except ValueError as exc:
        assert str(exc) and str(exc)[0].isupper()  # the 400's message
    else:
        assert samples.dtype == np.float32 and np.isfinite(samples).all()
