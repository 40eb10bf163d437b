"""Audio encoding of the synthesized speech (mono 16-bit little-endian PCM at the engine's rate,
24 kHz unless its spec says otherwise), with PyAV's bundled FFmpeg; no system libraries needed.
`encode` makes a whole file; `StreamEncoder` turns PCM chunks into bytes that can be sent as they
come. `output_format` maps a name to its `Format`; `at_sample_rate` a name and a request's
`sample_rate` to the name at that rate (pcm and 16000: pcm_16000).

The plain names (OpenAI's `response_format` values, `FORMATS`), all at 24 kHz on every engine
(OpenAI's contract: clients assume it of `pcm`; an engine that makes 48 kHz is heard at its own rate
with the extended names, `pcm_48000` or `wav_48000`):
  mp3   MPEG audio, 64 kbps
  opus  Opus in Ogg, 48 kbps
  aac   AAC in ADTS, 64 kbps
  flac  FLAC
  wav   16-bit mono WAV
  pcm   raw 16-bit little-endian mono, no header

The extended names (`OUTPUT_FORMATS`):
  ulaw_8000, alaw_8000   G.711 μ-law / A-law at 8 kHz: raw bytes, one per sample, no header
                         (as telephony media streams and SIP carry them)
  pcm_<rate>, wav_<rate> as pcm / wav at rate 8000, 16000, 22050, 24000, 32000, 44100 or 48000 Hz
  mp3_<rate>_<kbps>      MPEG audio at rate 22050, 24000 or 44100 Hz and 32, 48, 64, 96, 128, 160
                         or 192 kbps; 22050 and 24000 Hz are MPEG-2, which stops at 160 kbps
  mp3_44100              mp3_44100_128 (ElevenLabs' older name for it)
  opus_48000_<kbps>      Opus in Ogg at 48 kHz and 32, 64, 96, 128 or 192 kbps (ElevenLabs' names)

An output rate other than the input's goes through one libswresample resampler per stream
(`av.AudioResampler`), kept across chunks and flushed at the end: the output has n * rate / input
rate samples (to one) for n input samples, aligned with the input (the resampler's delay is
compensated). The 24 kHz names give exactly the bytes of the plain ones; at the input's own rate,
pcm and wav are the input's bytes.

Streaming: the bytes of `feed`s and `finish` concatenate to `encode(whole input)`, however the
input is split: for the raw formats (pcm, wav, ulaw, alaw) because libswresample's output depends
on the samples, not on how they arrive; for mp3, aac and flac because the encoder gets the same
frames (PyAV cuts them to its frame size). Exceptions: a streamed WAV's header says "unknown"
sizes, and Ogg gives every file a random stream serial number, so no two Opus files are
byte-identical (their audio is)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import av
import numpy as np

SAMPLE_RATE = 24000  # the plain names' rate, and the input's unless said (the engines' default)

CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
FORMATS = tuple(CONTENT_TYPES)

RAW_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)  # pcm_<rate>, wav_<rate>
MP3_RATES = (22050, 24000, 44100)  # mp3_<rate>_<kbps>
OPUS_RATE = 48000  # opus_48000_<kbps> (ElevenLabs' names), Opus's own rate
OPUS_KBPS = (32, 64, 96, 128, 192)
MP3_KBPS = (32, 48, 64, 96, 128, 160, 192)
MPEG2_MAX_KBPS = 160  # MPEG-2 layer III (22050 and 24000 Hz) has no bit rate above 160 kbps
G711_RATE = 8000

G711_CONTENT_TYPES = {"ulaw": "audio/basic", "alaw": "audio/x-alaw-basic"}

# codec family -> (container, FFmpeg encoder) for the lossy and compressed ones
_CONTAINERS = {
    "mp3": ("mp3", "libmp3lame"),
    "opus": ("ogg", "libopus"),
    "aac": ("adts", "aac"),
    "flac": ("flac", "flac"),
}
_G711_CODECS = {"ulaw": "pcm_mulaw", "alaw": "pcm_alaw"}


@dataclass(frozen=True)
class Format:
    """One output format: `name` as accepted, `codec` its family (mp3, opus, aac, flac, wav, pcm,
    ulaw or alaw), `sample_rate` of the output in Hz, `bit_rate` in bits/s for lossy codecs."""

    name: str
    codec: str
    sample_rate: int
    bit_rate: int | None
    content_type: str
    extension: str


def _build_formats() -> dict[str, Format]:
    plain_bit_rates = {"mp3": 64_000, "opus": 48_000, "aac": 64_000}
    formats = {
        name: Format(name, name, SAMPLE_RATE, plain_bit_rates.get(name), content_type, name)
        for name, content_type in CONTENT_TYPES.items()
    }
    for codec, content_type in G711_CONTENT_TYPES.items():
        name = f"{codec}_{G711_RATE}"
        formats[name] = Format(name, codec, G711_RATE, None, content_type, codec)
    for codec in ("pcm", "wav"):
        for rate in RAW_RATES:
            name = f"{codec}_{rate}"
            formats[name] = Format(name, codec, rate, None, CONTENT_TYPES[codec], codec)
    for rate in MP3_RATES:
        for kbps in MP3_KBPS:
            if rate < 32000 and kbps > MPEG2_MAX_KBPS:
                continue
            name = f"mp3_{rate}_{kbps}"
            formats[name] = Format(name, "mp3", rate, kbps * 1000, CONTENT_TYPES["mp3"], "mp3")
    formats["mp3_44100"] = Format(
        "mp3_44100", "mp3", 44100, 128_000, CONTENT_TYPES["mp3"], "mp3"
    )  # ElevenLabs' old name
    for kbps in OPUS_KBPS:
        name = f"opus_{OPUS_RATE}_{kbps}"
        formats[name] = Format(name, "opus", OPUS_RATE, kbps * 1000, CONTENT_TYPES["opus"], "opus")
    return formats


_FORMATS = _build_formats()
OUTPUT_FORMATS = tuple(name for name in _FORMATS if name not in CONTENT_TYPES)
ALL_FORMATS = FORMATS + OUTPUT_FORMATS  # every accepted name (the OpenAPI enum)


def _one_of(values: tuple[object, ...]) -> str:
    *rest, last = [str(v) for v in values]
    return f"{', '.join(rest)} or {last}" if rest else last


_ACCEPTED = (
    f"Use {_one_of(FORMATS)} (24 kHz), ulaw_8000, alaw_8000, pcm_<rate> or wav_<rate> with rate "
    f"{_one_of(RAW_RATES)}, or mp3_<rate>_<kbps> (rate {_one_of(MP3_RATES)}; kbps {_one_of(MP3_KBPS)}, "
    f"at most {MPEG2_MAX_KBPS} below 44100), or opus_{OPUS_RATE}_<kbps> (kbps {_one_of(OPUS_KBPS)}). Names are "
    "lower case."
)


def output_format(name: str) -> Format:
    """The `Format` for a plain or extended name; `ValueError` with a message for people otherwise."""
    fmt = _FORMATS.get(name) if isinstance(name, str) else None
    if fmt is not None:
        return fmt
    reason = ""
    if isinstance(name, str):
        parts = name.split("_")
        if name.lower() in _FORMATS:
            reason = " (names are lower case)"
        elif len(parts) == 3 and parts[0] == "mp3" and parts[1] in ("22050", "24000") and parts[2].isdigit():
            reason = f" (mp3 at {parts[1]} Hz is MPEG-2: at most {MPEG2_MAX_KBPS} kbps)"
    raise ValueError(f"Unsupported output_format {name!r}{reason}. {_ACCEPTED}")


# The rates a request's `sample_rate` may pick, by codec (opus, aac and flac have the plain names' rate only).
SAMPLE_RATES = {"pcm": RAW_RATES, "wav": RAW_RATES, "mp3": MP3_RATES, "ulaw": (G711_RATE,), "alaw": (G711_RATE,)}


def at_sample_rate(name: str, rate: int) -> str:
    """The name of format `name` at `rate` Hz (a request's `sample_rate`): plain pcm, wav and mp3 become
    pcm_<rate>, wav_<rate> and mp3_<rate>_<plain mp3's kbps>; an extended name stays as it is if it says
    `rate`. `ValueError` with a message for people otherwise (a rate not offered, a fixed-rate codec,
    an extended name at another rate)."""
    fmt = output_format(name)
    rates = SAMPLE_RATES.get(fmt.codec)
    if rates is None:
        if rate == fmt.sample_rate:  # the rate it has anyway: a client that always sends one is served
            return name
        raise ValueError(
            f"{fmt.codec} is always {fmt.sample_rate} Hz (opus, aac and flac have that fixed rate); sample_rate "
            f"applies to {_one_of(tuple(SAMPLE_RATES))}."
        )
    if rate not in rates:
        raise ValueError(f"{rate} Hz is not offered for {fmt.codec}; valid rates: {_one_of(rates)}.")
    if name != fmt.codec:  # an extended name: its rate is said already
        if fmt.sample_rate != rate:
            raise ValueError(f"{rate} contradicts {name}, which is {fmt.sample_rate} Hz; send one or the other.")
        return name
    if fmt.codec == "mp3":
        return f"mp3_{rate}_{(fmt.bit_rate or 0) // 1000}"
    return f"{fmt.codec}_{rate}"


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


def encode(pcm16: bytes, fmt: str, rate: int = SAMPLE_RATE) -> bytes:
    """Encode mono 16-bit little-endian PCM at `rate` Hz into a whole `fmt` file."""
    spec = output_format(fmt)
    if spec.codec in ("pcm", "wav") and spec.sample_rate == rate:
        body = pcm16
    else:
        # A whole WAV is its PCM after a header with the sizes.
        encoder = StreamEncoder(f"pcm_{spec.sample_rate}" if spec.codec == "wav" else fmt, rate)
        body = encoder.feed(pcm16) + encoder.finish()
    return wav_header(len(body) // 2, spec.sample_rate) + body if spec.codec == "wav" else body


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
    """Encodes PCM chunks at `rate` Hz (the engine's) as they arrive; `feed` returns the bytes ready to send (maybe
    none: the resampler holds back a few milliseconds, encoders a frame or so) and `finish` the
    rest. WAV gets a header whose sizes say "unknown", as streamed WAV does."""

    def __init__(self, fmt: str, rate: int = SAMPLE_RATE):
        self.fmt = fmt
        self.input_rate = rate
        self.format = output_format(fmt)
        self._header_sent = self.format.codec != "wav"
        self._odd = b""  # a chunk's trailing half sample, completed by the next chunk
        self._pts = 0
        self._resampler: av.AudioResampler | None = None
        self._g711: av.AudioCodecContext | None = None
        rate = self.format.sample_rate
        if self.format.codec in _CONTAINERS:
            container_name, codec = _CONTAINERS[self.format.codec]
            self._sink = _Sink()
            options = {"page_duration": "100000"} if container_name == "ogg" else {}  # Ogg pages every 0.1 s
            self._container = av.open(self._sink, mode="w", format=container_name, options=options)
            stream = self._container.add_stream(codec, rate=rate, layout="mono")
            assert isinstance(stream, av.AudioStream)
            self._stream = stream
            if self.format.bit_rate:
                self._stream.bit_rate = self.format.bit_rate
            # PyAV cuts the frames to the encoder's frame size itself.
            self._resampler = av.AudioResampler(format=self._stream.codec_context.format.name, layout="mono", rate=rate)
            return
        if rate != self.input_rate:
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        if self.format.codec in _G711_CODECS:
            g711 = av.CodecContext.create(_G711_CODECS[self.format.codec], "w")
            assert isinstance(g711, av.AudioCodecContext)
            g711.sample_rate = rate
            g711.layout = "mono"
            g711.format = "s16"
            g711.open()
            self._g711 = g711

    def _frame(self, pcm16: bytes) -> av.AudioFrame | None:
        data = self._odd + pcm16
        usable = len(data) - len(data) % 2
        self._odd = data[usable:]
        if not usable:
            return None
        samples = np.frombuffer(data[:usable], dtype="<i2").reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = self.input_rate
        frame.pts = self._pts
        self._pts += frame.samples
        return frame

    def _raw(self, frames: list[av.AudioFrame]) -> bytes:
        if self._g711 is not None:
            return b"".join(bytes(packet) for frame in frames for packet in self._g711.encode(frame))
        return b"".join(frame.to_ndarray().astype("<i2", copy=False).tobytes() for frame in frames)

    def _mux(self, frames) -> None:
        for out_frame in frames:
            for packet in self._stream.encode(out_frame):
                self._container.mux(packet)

    def feed(self, pcm16: bytes) -> bytes:
        head = b""
        if not self._header_sent:
            head = wav_header(None, self.format.sample_rate)
            self._header_sent = True
        if self.format.codec in ("pcm", "wav") and self._resampler is None:
            return head + pcm16  # at the input's rate: the input as it is
        frame = self._frame(pcm16)
        if frame is None:
            return head
        frames = self._resampler.resample(frame) if self._resampler is not None else [frame]
        if self.format.codec in _CONTAINERS:
            self._mux(frames)
            return self._sink.drain()
        return head + self._raw(frames)

    def finish(self) -> bytes:
        """The rest: the resampler's and encoder's tails; for a WAV never fed, a whole empty file."""
        if not self._header_sent:
            self._header_sent = True
            return wav_header(0, self.format.sample_rate)
        tail = self._resampler.resample(None) if self._resampler is not None else []
        if self.format.codec in _CONTAINERS:
            self._mux(tail)
            self._mux([None])
            self._container.close()
            return self._sink.drain()
        out = self._raw(tail)
        if self._g711 is not None:
            out += b"".join(bytes(packet) for packet in self._g711.encode(None))
        return out
