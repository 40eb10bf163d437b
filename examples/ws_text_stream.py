"""Text streamed in (WebSocket protocol `tts.v2`, docs/websocket.md): what a voice agent does with an
LLM's reply. The text is sent a word at a time, with a delay, as tokens would arrive; the server
speaks each sentence as soon as it is complete, so audio starts long before the reply is. The
audio (16-bit PCM at 24 kHz) goes to a WAV file as it comes; the `end` message's segments say when
each sentence is spoken.

    python examples/ws_text_stream.py --key "$TTS_API_KEY" --delay 0.1 "First sentence. Second one."
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import wave

import websockets

REPLY = (
    "Sure, I can help with that. Your order left our warehouse this morning. "
    "It should arrive within two days, and you will get a tracking link by e-mail."
)


async def main(args: argparse.Namespace) -> None:
    headers = {"Authorization": f"Bearer {args.key}"}
    async with websockets.connect(args.url, additional_headers=headers, subprotocols=["tts.v2"]) as ws:
        print("connected:", json.loads(await ws.recv()))
        begin = {"type": "begin", "id": "reply", "voice": args.voice, "format": "pcm"}
        if args.seed is not None:
            begin["seed"] = args.seed
        await ws.send(json.dumps(begin))
        started = time.monotonic()

        async def type_reply() -> None:
            for word in args.text.split(" "):
                await ws.send(json.dumps({"type": "text", "id": "reply", "text": word + " "}))
                await asyncio.sleep(args.delay)
            await ws.send(json.dumps({"type": "close", "id": "reply"}))  # speak what is left, then end
            print(f"text sent in {time.monotonic() - started:.2f} s")

        typing = asyncio.create_task(type_reply())
        with wave.open(args.out, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(24000)
            first = None
            while True:
                frame = await ws.recv()
                if isinstance(frame, bytes):
                    if first is None:
                        first = time.monotonic() - started
                        print(f"first audio after {first:.2f} s")
                    out.writeframes(frame)
                    continue
                message = json.loads(frame)
                if message["type"] == "end":
                    for segment in message.get("segments", []):
                        print(f"{segment['start']:7.2f} - {segment['end']:7.2f}  {segment['text']}")
                    print(f"{message.get('audio_seconds')} s of audio, {message['characters']} characters billed")
                    break
                if message["type"] == "error":
                    print(message)
                    break
        await typing
    print("wrote", args.out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", nargs="?", default=REPLY)
    parser.add_argument("--url", default="ws://127.0.0.1:8000/v1/audio/stream")
    parser.add_argument("--key", required=True)
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--delay", type=float, default=0.1, help="seconds between words")
    parser.add_argument("--out", default="reply.wav")
    asyncio.run(main(parser.parse_args()))
