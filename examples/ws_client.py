"""A small client of the tts.v1 WebSocket protocol (docs/websocket.md): speaks each sentence given
on one connection and writes each utterance to a WAV file as its audio arrives."""

from __future__ import annotations

import argparse
import asyncio
import json
import wave

import websockets


async def main(url: str, key: str, voice: str, sentences: list[str], seed: int | None) -> None:
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        ready = json.loads(await ws.recv())
        print("connected:", ready)
        for i, text in enumerate(sentences):
            message = {"type": "synthesize", "id": f"s{i}", "text": text, "voice": voice}
            if seed is not None:
                message["seed"] = seed  # reproducible (and cacheable) audio
            await ws.send(json.dumps(message))
        for _ in sentences:
            out = None
            while True:
                frame = await ws.recv()
                if isinstance(frame, bytes):
                    out.writeframes(frame)  # audio arrives while it is generated
                    continue
                message = json.loads(frame)
                if message["type"] == "start":
                    out = wave.open(f"{message['id']}.wav", "wb")
                    out.setnchannels(1)
                    out.setsampwidth(2)
                    out.setframerate(message["sample_rate"])
                elif message["type"] in ("end", "error"):
                    print(message)
                    if out is not None:
                        out.close()
                    break


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="ws://127.0.0.1:8000/v1/audio/stream")
    parser.add_argument("--key", required=True)
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--seed", type=int)
    parser.add_argument("sentences", nargs="*", default=["Hello from the WebSocket.", "你好，这是第二句。"])
    args = parser.parse_args()
    asyncio.run(main(args.url, args.key, args.voice, args.sentences, args.seed))
