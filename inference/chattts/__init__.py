"""ChatTTS (2noise/ChatTTS): an autoregressive GPT over audio tokens, our own batched generation
loop over its modules, windowed decoding. `spec.SPEC` says what it is and may do (no torch);
`engine.ChatTTSEngine` runs it (worker processes only)."""
