"""Output formats of synthesis.audio, checked by decoding the output with PyAV (FFmpeg's decoders,
not the encoder's own view): names and their parsing, decoded sample rate and length of every
pcm/wav rate, G.711 and mp3 variant, G.711 against 8 kHz PCM within G.711's quantisation error,
the pitch of a resampled sine, streaming in uneven chunks against whole-file encoding (same bytes,
no clicks at the joins), and the 24 kHz names against the plain ones."""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import pytest

from synthesis.audio.formats import (
    CONTENT_TYPES,
    FORMATS,
    OUTPUT_FORMATS,
    SAMPLE_RATE,
    Format,
    StreamEncoder,
    encode,
    output_format,
    wav_header,
)

RAW_DEMUXERS = {"pcm": "s16le", "ulaw": "mulaw", "alaw": "alaw"}
DEMUXERS = {"opus": "ogg"}  # the others are named as their codec
CHUNKS = (1000, 2517, 333, 1, 4800, 77)  # samples, cycled


def sine(seconds: float = 1.0, hz: float = 440.0, amplitude: float = 0.5, rate: int = SAMPLE_RATE) -> bytes:
    t = np.arange(round(seconds * rate)) / rate
    return np.round(amplitude * 32767 * np.sin(2 * np.pi * hz * t)).astype("<i2").tobytes()


SINE = sine()


def decode(data: bytes, name: str) -> tuple[np.ndarray, int]:
    """The samples (full scale = 1.0) and sample rate that FFmpeg decodes from `data`."""
    fmt = output_format(name)
    if fmt.codec in RAW_DEMUXERS:
        options = {"sample_rate": str(fmt.sample_rate), "ch_layout": "mono"}
        container = av.open(io.BytesIO(data), "r", format=RAW_DEMUXERS[fmt.codec], options=options)
    else:
        container = av.open(io.BytesIO(data), "r", format=DEMUXERS.get(fmt.codec, fmt.codec))
    with container:
        stream = container.streams.audio[0]
        assert stream.codec_context.layout.nb_channels == 1
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
        rate = stream.codec_context.sample_rate
    samples = np.concatenate(frames)
    scale = 32768.0 if samples.dtype == np.int16 else 1.0
    return samples.astype(np.float64) / scale, rate


def streamed(pcm16: bytes, name: str, chunks=CHUNKS, rate: int = SAMPLE_RATE) -> bytes:
    encoder = StreamEncoder(name, rate)
    out, pos, i = [], 0, 0
    while pos < len(pcm16):
        size = 2 * chunks[i % len(chunks)]
        out.append(encoder.feed(pcm16[pos : pos + size]))
        pos, i = pos + size, i + 1
    return b"".join(out) + encoder.finish()


# --- names ---


def test_plain_names_keep_their_meaning():
    assert FORMATS == ("mp3", "opus", "aac", "flac", "wav", "pcm")
    assert output_format("mp3") == Format("mp3", "mp3", 24000, 64_000, "audio/mpeg", "mp3")
    assert output_format("opus") == Format("opus", "opus", 24000, 48_000, "audio/ogg", "opus")
    assert output_format("aac") == Format("aac", "aac", 24000, 64_000, "audio/aac", "aac")
    assert output_format("flac") == Format("flac", "flac", 24000, None, "audio/flac", "flac")
    assert output_format("wav") == Format("wav", "wav", 24000, None, "audio/wav", "wav")
    assert output_format("pcm") == Format("pcm", "pcm", 24000, None, "audio/pcm", "pcm")


def test_every_name_parses_to_a_sensible_format():
    assert not set(FORMATS) & set(OUTPUT_FORMATS) and len(set(OUTPUT_FORMATS)) == len(OUTPUT_FORMATS)
    for rate in (8000, 16000, 22050, 24000, 32000, 44100, 48000):
        assert {f"pcm_{rate}", f"wav_{rate}"} <= set(OUTPUT_FORMATS)
    assert {"ulaw_8000", "alaw_8000", "mp3_22050_32", "mp3_22050_160", "mp3_44100_192"} <= set(OUTPUT_FORMATS)
    for name in FORMATS + OUTPUT_FORMATS:
        fmt = output_format(name)
        assert fmt.name == name and fmt.content_type.startswith("audio/") and fmt.extension
        assert name.startswith(fmt.codec) and (fmt.bit_rate is not None) == (fmt.codec in ("mp3", "opus", "aac"))
        if fmt.codec in CONTENT_TYPES:
            assert fmt.content_type == CONTENT_TYPES[fmt.codec] and fmt.extension == fmt.codec
    assert output_format("ulaw_8000").content_type == "audio/basic"
    assert output_format("alaw_8000").content_type == "audio/x-alaw-basic"
    assert output_format("mp3_44100_128") == Format("mp3_44100_128", "mp3", 44100, 128_000, "audio/mpeg", "mp3")
    older = output_format("mp3_44100")  # ElevenLabs' older name
    assert (older.codec, older.sample_rate, older.bit_rate) == ("mp3", 44100, 128_000)


@pytest.mark.parametrize(
    "name",
    ["pcm_12345", "mp3_22050_192", "mp3_24000_192", "mp3_32000", "mp3_44100_100", "ulaw_16000", "ulaw", "", "MP3",
     "Pcm_16000", "wav_16000 ", "pcm_016000", "opus_48000", "opus_24000_64", "opus_48000_100"],
)  # fmt: skip
def test_bad_names_are_rejected_with_a_clear_message(name):
    with pytest.raises(ValueError) as error:
        output_format(name)
    message = str(error.value)
    assert repr(name) in message and "lower case" in message
    assert all(form in message for form in ("ulaw_8000", "alaw_8000", "pcm_<rate>", "wav_<rate>", "mp3_<rate>_<kbps>"))
    with pytest.raises(ValueError):
        StreamEncoder(name)


def test_rejection_says_why_when_it_can():
    assert "at most 160 kbps" in str(pytest.raises(ValueError, output_format, "mp3_22050_192").value)
    assert "(names are lower case)" in str(pytest.raises(ValueError, output_format, "WAV_8000").value)


# --- decoded rate and length ---


@pytest.mark.parametrize("name", [n for n in OUTPUT_FORMATS if not n.startswith(("mp3", "opus"))])
def test_raw_formats_decode_at_their_rate_and_length(name):
    samples, rate = decode(encode(SINE, name), name)
    fmt = output_format(name)
    assert rate == fmt.sample_rate
    # One second in, one second out: the resampler's delay is compensated and its tail flushed.
    assert abs(len(samples) - fmt.sample_rate) <= 1


@pytest.mark.parametrize("kbps", [32, 192])
def test_elevenlabs_opus_names_are_48_khz_opus_at_their_bit_rate(kbps):
    name = f"opus_48000_{kbps}"
    assert output_format(name) == Format(name, "opus", 48000, kbps * 1000, "audio/ogg", "opus")
    noise = np.random.default_rng(0).integers(-8000, 8000, 24000 * 2).astype("<i2").tobytes()  # 2 s at 24 kHz
    data = encode(noise, name)
    samples, rate = decode(data, name)
    assert rate == 48000 and 1.95 <= len(samples) / rate <= 2.1
    assert 0.5 <= len(data) * 8 / 2 / (kbps * 1000) <= 1.5  # about the bit rate named (noise fills it)


@pytest.mark.parametrize("name", ["mp3_22050_32", "mp3_44100_128", "mp3_24000_160"])
def test_mp3_variants_decode_at_their_rate_and_length(name):
    samples, rate = decode(encode(SINE, name), name)
    assert rate == output_format(name).sample_rate
    # Without a LAME info tag (the muxer writes none to a stream it cannot seek) the decoder keeps
    # the encoder's delay and last-frame padding: longer, never shorter, by under 0.1 s.
    assert 1.0 <= len(samples) / rate <= 1.1


@pytest.mark.parametrize("name", FORMATS)
def test_plain_formats_still_decode_at_24k(name):
    samples, rate = decode(streamed(SINE, name), name)
    assert rate == (48000 if name == "opus" else 24000)  # Opus decoders always give 48 kHz
    # Lossy encoders' priming and padding may stay (no edit lists in a stream), under 0.1 s.
    assert 1.0 - 1e-3 <= len(samples) / rate <= 1.1


# --- the signal itself ---


@pytest.mark.parametrize("name", ["ulaw_8000", "alaw_8000"])
def test_g711_is_pcm_8000_within_quantisation_error(name):
    reference, _ = decode(encode(SINE, "pcm_8000"), "pcm_8000")
    companded, _ = decode(encode(SINE, name), name)
    assert len(companded) == len(reference)
    # Both come from the same 8 kHz samples, so the difference is G.711's alone. G.711 keeps 4
    # mantissa bits per segment, so a decoded sample is off by at most half a step: 1/32 of its
    # magnitude. The lowest segments have a fixed step (up to 16 LSB of 16-bit for A-law), hence
    # a floor of 16 LSB.
    bound = np.abs(reference) / 32 + 16 / 32768
    assert np.all(np.abs(companded - reference) <= bound)
    assert np.abs(reference).max() > 0.45  # the sine went through, not silence


@pytest.mark.parametrize("name", ["pcm_8000", "pcm_48000", "ulaw_8000"])
def test_resampled_sine_keeps_its_pitch(name):
    samples, rate = decode(encode(SINE, name), name)
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    peak_hz = np.argmax(spectrum) * rate / len(samples)
    assert abs(peak_hz - 440) <= 1  # 1 s of signal: 1 Hz bins
    assert np.max(np.abs(samples)) == pytest.approx(0.5, abs=0.02)  # and its level


# --- streaming ---


@pytest.mark.parametrize("name", ["pcm_16000", "ulaw_8000", "alaw_8000", "pcm_44100", "pcm_24000"])
def test_uneven_chunks_give_the_whole_file_bytes(name):
    assert streamed(SINE, name) == encode(SINE, name)


def test_streamed_resampling_has_no_clicks_at_chunk_joins():
    whole, _ = decode(encode(SINE, "pcm_16000"), "pcm_16000")
    parts, _ = decode(streamed(SINE, "pcm_16000"), "pcm_16000")
    assert len(parts) == len(whole)
    assert np.max(np.abs(parts - whole)) <= 1 / 32768
    assert np.max(np.abs(np.diff(parts))) <= np.max(np.abs(np.diff(whole)))
    # A 440 Hz sine of amplitude 0.5 at 16 kHz moves at most 2π·440/16000·0.5 per sample; the
    # first and last few samples are left out, where the input starts and stops abruptly.
    assert np.max(np.abs(np.diff(parts[8:-8]))) <= 2 * np.pi * 440 / 16000 * 0.5 * 1.01


def test_a_chunk_may_end_in_half_a_sample():
    encoder = StreamEncoder("pcm_16000")
    cuts = [0, 2001, 2667, 7701, len(SINE)]  # bytes: chunks of 1000.5, 333 and 2517 samples, then the rest
    data = b"".join(encoder.feed(SINE[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)) + encoder.finish()
    assert data == encode(SINE, "pcm_16000")


def test_streamed_wav_header_has_unknown_sizes_and_the_rate():
    data = streamed(SINE, "wav_16000")
    assert data[:44] == wav_header(None, 16000)
    assert struct.unpack("<I", data[24:28]) == (16000,)
    assert data[44:] == encode(SINE, "pcm_16000") == encode(SINE, "wav_16000")[44:]


@pytest.mark.parametrize("name", ["mp3_22050_32", "mp3_44100_128"])
def test_streamed_mp3_is_the_whole_file(name):
    assert streamed(SINE, name) == encode(SINE, name)


def test_no_input():
    assert encode(b"", "ulaw_8000") == b"" and encode(b"", "pcm_44100") == b""
    assert encode(b"", "wav_8000") == wav_header(0, 8000)
    assert StreamEncoder("wav_8000").finish() == wav_header(0, 8000)


# --- 24 kHz names are the plain ones ---


@pytest.mark.parametrize(("extended", "plain"), [("pcm_24000", "pcm"), ("wav_24000", "wav"), ("mp3_24000_64", "mp3")])
def test_24k_names_give_the_plain_bytes(extended, plain):
    assert encode(SINE, extended) == encode(SINE, plain)
    assert streamed(SINE, extended) == streamed(SINE, plain)
    assert output_format(extended).content_type == output_format(plain).content_type


# --- an engine that makes another rate (VoxCPM2: 48 kHz) ---

SINE_48K = sine(rate=48000)


def test_plain_pcm_is_24k_whatever_the_engine_makes():
    """OpenAI's contract: `pcm` is 24 kHz 16-bit mono, so 48 kHz audio is resampled for it, its
    pitch and length kept; at the engine's own rate the bytes are the engine's."""
    out = encode(SINE_48K, "pcm", 48000)
    samples, rate = decode(out, "pcm")
    assert rate == 24000 and abs(len(samples) - 24000) <= 1
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    assert abs(np.argmax(spectrum) * rate / len(samples) - 440) <= 1
    assert encode(SINE_48K, "pcm_48000", 48000) == SINE_48K
    assert streamed(SINE_48K, "pcm", rate=48000) == out


@pytest.mark.parametrize("name", ["wav", "wav_48000", "mp3", "opus", "flac", "ulaw_8000", "mp3_44100_128"])
def test_48k_input_decodes_as_the_same_audio_at_24k_does(name):
    """The same second of sine, made at 48 kHz or at 24 kHz, decodes at the same rate and length
    (mp3 and opus pad as they always do) and pitch."""
    samples, rate = decode(encode(SINE_48K, name, 48000), name)
    at_24k, rate_24k = decode(encode(SINE, name), name)
    assert rate == rate_24k and abs(len(samples) - len(at_24k)) <= 2
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    assert abs(np.argmax(spectrum) * rate / len(samples) - 440) <= 2


def test_a_wav_at_the_engines_rate_says_its_rate_in_the_header():
    data = encode(SINE_48K, "wav_48000", 48000)
    assert struct.unpack("<I", data[24:28])[0] == 48000 and data[44:] == SINE_48K
    assert struct.unpack("<I", encode(SINE_48K, "wav", 48000)[24:28])[0] == 24000
