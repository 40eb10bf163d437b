"""Telephony audio: G.711 μ-law at 8 kHz, what Twilio Media Streams and SIP gateways carry.

Asks `POST /v1/audio/speech` for `output_format: ulaw_8000`, reads the audio as it is generated
and cuts it into 20 ms frames (160 bytes: 160 samples of one byte at 8 kHz), the unit a media
stream sends. Each frame is written as the `media` message a Twilio Media Stream expects from your
server (`{"event": "media", "streamSid": …, "media": {"payload": <base64>}}`), one per line, so you
can see exactly what to send on the call's WebSocket; the whole call audio also goes to a μ-law
WAV file (format 7) that any player opens.

    python examples/telephony_ulaw.py --key "$TTS_API_KEY" "Thanks for calling. How can I help?"

Needs only httpx (the service's own dependency).
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import time

import httpx

RATE = 8000
FRAME_BYTES = 160  # 20 ms of μ-law at 8 kHz


def mulaw_wav(body: bytes) -> bytes:
    """A WAV file around μ-law samples (WAVE_FORMAT_MULAW = 7, 8 bits, mono, 8 kHz)."""
    fmt = struct.pack("<HHIIHHH", 7, 1, RATE, RATE, 1, 8, 0)
    fact = struct.pack("<I", len(body))
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"fact" + struct.pack("<I", 4) + fact
    chunks += b"data" + struct.pack("<I", len(body)) + body + (b"\0" if len(body) % 2 else b"")
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text")
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", required=True)
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--stream-sid", default="MZ00000000000000000000000000000000")
    parser.add_argument("--frames", default="call.frames.jsonl", help="Twilio media messages, one per line")
    parser.add_argument("--wav", default="call.wav", help="the same audio as a μ-law WAV file")
    args = parser.parse_args()

    body = {"model": "tts-1", "voice": args.voice, "input": args.text, "output_format": "ulaw_8000"}
    audio, pending, frames = b"", b"", 0
    started = time.monotonic()
    with (
        httpx.stream(
            "POST",
            f"{args.url}/v1/audio/speech",
            json=body,
            headers={"Authorization": f"Bearer {args.key}"},
            timeout=300,
        ) as response,
        open(args.frames, "w") as out,
    ):
        if response.status_code != 200:
            response.read()
            raise SystemExit(f"{response.status_code}: {response.text}")
        assert response.headers["content-type"] == "audio/basic"  # raw μ-law, no header

        def send(frame: bytes) -> None:
            media = {"payload": base64.b64encode(frame).decode()}
            out.write(json.dumps({"event": "media", "streamSid": args.stream_sid, "media": media}) + "\n")

        for chunk in response.iter_bytes():
            if not audio:
                print(f"first audio after {time.monotonic() - started:.2f} s")
            audio += chunk
            pending += chunk
            while len(pending) >= FRAME_BYTES:  # send whole 20 ms frames as soon as they exist
                send(pending[:FRAME_BYTES])
                pending, frames = pending[FRAME_BYTES:], frames + 1
        if pending:
            send(pending + b"\xff" * (FRAME_BYTES - len(pending)))  # pad with μ-law silence (0xFF)
            frames += 1
    with open(args.wav, "wb") as wav:
        wav.write(mulaw_wav(audio))
    print(f"{len(audio) / RATE:.2f} s of audio: {frames} frames in {args.frames}, listen to {args.wav}")


if __name__ == "__main__":
    main()
