"""The synthesis worker process: the engine it serves, the batcher thread that drives it, and one
job's run through the batches (audio published in order, captions, settlement)."""
