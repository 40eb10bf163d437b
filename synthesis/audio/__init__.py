"""Audio plumbing shared by the API and the workers: output formats and codecs, captions, the audio
cache, and each job's event stream in Redis."""
