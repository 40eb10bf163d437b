"""The rules of a speech request between the API and the workers: preparation, admission (slots,
capacity, identical requests), the job's life (the only writer of Job.status), the queue, reading a
job's audio, callbacks, maintenance, the worker registry and the operators' figures."""
