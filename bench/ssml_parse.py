"""What SSML costs before synthesis, per 1,000 characters, against Kokoro's synthesis of the same speech.

One document of about 1,000 spoken characters in the shape telephony sends (sentences, breaks, a
phone number, dates, amounts, an alias, a phoneme, a slower span, marks) is:

- parsed and prepared as the web process does (`inference.text.ssml_text.prepare_ssml` unmemoised, then
  `finish` with an empty lexicon): the SSML's own cost;
- its plain-text twin prepared the same way (`inference.text.preparation.prepare` unmemoised): the baseline
  every request pays;
- read by the Kokoro worker (each segment spelled out and phonemised: `engine.read` and the G2P in
  the row's budget), memos cleared: what a worker does before the model, SSML or not;
- synthesised by Kokoro on the full-size random checkpoint (the official shapes, so the real
  compute), one request, its segments as SSML made them.

Target (issue 33): SSML's parse and preparation under 5 % of Kokoro's synthesis time for the same text.

    .venv/bin/python bench/ssml_parse.py [--runs 5] [--size full] [--threads 2]
"""

from __future__ import annotations

import statistics
import time

from common import checkpoint, setup

PARAGRAPH = (
    '<p>Thank you for calling the city library.<break time="400ms"/> '
    '<mark name="hours-{n}"/>Our branch on Main Street opens at <say-as interpret-as="time">9:30am</say-as> '
    'and closes at <say-as interpret-as="time">6pm</say-as>. '
    'For renewals, call <say-as interpret-as="telephone">+1 (555) 010-0199</say-as>. '
    'Books borrowed before <say-as interpret-as="date" format="mdy">12/24/2026</say-as> '
    'are due back within <say-as interpret-as="cardinal">21</say-as> days; a late fee is '
    '<say-as interpret-as="currency">$0.25</say-as> a day. '
    '<prosody rate="slow">Please have your card ready.</prosody> '
    'Visit <sub alias="the library\'s web site">lib.example</sub> or ask for '
    '<phoneme alphabet="ipa" ph="kˈOkəɹO">Kokoro</phoneme>, our assistant.</p>'
)


def document(spoken_chars: int = 1000):
    from inference.kokoro.spec import SPEC
    from inference.text.ssml import parse

    paragraphs = []
    while True:
        paragraphs.append(PARAGRAPH.format(n=len(paragraphs)))
        text = "<speak>" + "".join(paragraphs) + "</speak>"
        doc = parse(text, SPEC.name, SPEC.phoneme_symbols, SPEC.languages)
        if doc.billed >= spoken_chars:
            return text, doc


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    args = setup(__doc__, runs=5, extra=lambda p: p.add_argument("--threads", type=int, default=2))
    import torch

    from inference.engine import SynthesisRequest
    from inference.kokoro import text as kokoro_text
    from inference.kokoro.engine import KokoroEngine
    from inference.kokoro.spec import SPEC
    from inference.text.preparation import normalize_segment, prepare
    from inference.text.ssml_text import finish, prepare_ssml

    torch.set_num_threads(args.threads)
    ssml, doc = document()
    plain = " ".join(
        w.shown.strip() for w in doc.items if hasattr(w, "shown") and w.shown.strip()
    )  # the same speech as text
    per = 1000 / doc.billed
    print(f"document: {len(ssml)} characters of SSML, {doc.billed} spoken ({len(plain)} as plain text)")

    def ssml_prep():
        return finish(
            prepare_ssml(ssml, SPEC.name, SPEC.inline_tags, SPEC.languages, SPEC.phoneme_symbols, SPEC.segmenting),
            lambda t: t,
        )

    prepared = ssml_prep()
    ssml_s = best(ssml_prep, args.runs * 20)
    plain_s = best(
        lambda: prepare.__wrapped__(plain, SPEC.inline_tags, SPEC.languages, SPEC.name, SPEC.segmenting), args.runs * 20
    )
    print(
        f"web: SSML parse + preparation {ssml_s * 1000 * per:.2f} ms per 1,000 spoken characters "
        f"({len(prepared.segments)} segments); plain text's preparation {plain_s * 1000 * per:.2f} ms"
    )

    engine = KokoroEngine.load(checkpoint(args.size, "kokoro"), device="cpu")
    params = SPEC.params.from_request({"speed": 1.0}, {"builtin": "af_heart"}, 0)

    def worker_read():
        normalize_segment.cache_clear()
        kokoro_text.read.cache_clear()
        texts = [engine.read(s, params) for s in prepared.segments]
        return [engine.row_budget(t, params) for t in texts]

    worker_read()  # the grammars and G2P loaded once
    read_s = best(worker_read, args.runs)
    request = SynthesisRequest([engine.read(s, params) for s in prepared.segments], params)
    list(engine.synthesize(request))  # warm
    audio = 0.0

    def synth():
        nonlocal audio
        audio = sum(len(p) for p in engine.synthesize(request)) / SPEC.sample_rate

    synth_s = best(synth, args.runs)
    print(f"worker: spelling out and G2P {read_s * 1000 * per:.1f} ms per 1,000 spoken characters (SSML or not)")
    print(
        f"Kokoro ({args.size}, {args.threads} threads): {synth_s * per:.2f} s per 1,000 spoken characters "
        f"({audio:.1f} s of audio for {doc.billed} characters)"
    )
    print(
        f"SSML's parse + preparation / Kokoro's synthesis: {100 * ssml_s / synth_s:.3f} % (target < 5 %); "
        f"with the worker's reading: {100 * (ssml_s + read_s) / synth_s:.2f} %"
    )


if __name__ == "__main__":
    main()
