"""The public synthesis API (/v1/audio/speech, /v1/voices), jobs, the audio cache, chunk streams
and the Celery tasks that run the engine on GPU workers."""
