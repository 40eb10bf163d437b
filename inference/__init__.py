"""Inference: the engine interface, the ChatTTS engine, text preparation and generated checkpoints.

Plain Python and torch; imports no Django app. Modules that need torch import it themselves, so
`inference.text.preparation` and `inference.voices` stay importable in the web process.
"""
