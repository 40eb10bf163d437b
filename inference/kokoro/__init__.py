"""Kokoro-82M (hexgrad/kokoro): a StyleTTS 2-style model that predicts each phoneme's duration and
decodes a whole sentence at once. `spec.SPEC` says what it is and may do (no torch);
`engine.KokoroEngine` runs it (worker processes only)."""
