"""tts_saas settings. Every value comes from the environment; the defaults run locally as is."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .dashboard_settings import *  # noqa: F403 (the product's name, logo, source and operator contact)
from .env import envbool, envfloat, envint, envsecret, envstr
from .identity_settings import *  # noqa: F403 (allauth: single sign-on, second factors)
from .identity_settings import IDENTITY_APPS, IDENTITY_MIDDLEWARE
from .schema_settings import SPECTACULAR_SETTINGS  # noqa: F401 (the OpenAPI schema and its reference)
from .voice_settings import *  # noqa: F403 (voice cloning: the operator's switch, its rate)
from .webhook_settings import *  # noqa: F403 (callbacks and webhooks: retries, the log, private targets)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("TTS_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = envbool("DEBUG", False)
# Signs sessions, CSRF tokens and password-reset links: a public default would let anyone forge
# them, so without DEBUG there is none (scripts/run makes one per checkout in var/secret_key).
SECRET_KEY = envsecret("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (or SECRET_KEY_FILE) to a long random value, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    SECRET_KEY = "insecure-debug-only-key"
ALLOWED_HOSTS = [h for h in envstr("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Redoc/Swagger UI assets served locally (no CDN)
    "accounts",
    "billing",
    "voices",
    "synthesis",
    "dashboard",
    *IDENTITY_APPS,
]

MIDDLEWARE = [
    "tts_saas.request_id.RequestIdMiddleware",
    "tts_saas.errors.ErrorShapeMiddleware",  # errors under /elevenlabs/ in ElevenLabs' shape, whoever refused
    "tts_saas.limits.HeaderLimitsMiddleware",  # > 100 header fields or > 16 KiB of them: 431
    "tts_saas.limits.BodyLimitsMiddleware",  # a body over TTS_MAX_BODY_BYTES: 413, never parsed
    "billing.ratelimit.RateLimitHeadersMiddleware",
    "tts_saas.metrics.MetricsMiddleware",
    "tts_saas.errors.OutageMiddleware",  # Redis or the database down: 503 + Retry-After, not 500
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    *IDENTITY_MIDDLEWARE,
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tts_saas.urls"
ASGI_APPLICATION = "tts_saas.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context.branding",
            ],
        },
    },
]

_sqlite_path = VAR_DIR / "db.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{_sqlite_path}"), conn_max_age=envint("DB_CONN_MAX_AGE", 0)
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so that the web and worker processes started by tests share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    # IMMEDIATE: a write transaction takes the lock when it begins, so concurrent writers wait
    # (busy timeout) instead of failing with "database is locked"; WAL lets reads go on meanwhile.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = envstr("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_MAX_CONNECTIONS = envint("REDIS_MAX_CONNECTIONS", 500)  # per process and event loop; callers queue beyond
REDIS_POOL_TIMEOUT = envfloat("REDIS_POOL_TIMEOUT", 20.0)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "tts",
    }
}

# django-ratelimit counts in the default cache (Redis: atomic incr, shared by all web processes).
RATELIMIT_USE_CACHE = "default"
# Throttles on the ways in (POSTs; dashboard/throttles.py): per client address unless said.
TTS_LOGIN_RATE = envstr("TTS_LOGIN_RATE", "10/m")  # sign-in and accepting invitations
TTS_LOGIN_ACCOUNT_RATE = envstr("TTS_LOGIN_ACCOUNT_RATE", "30/h")  # sign-in per account name
TTS_SIGNUP_RATE = envstr("TTS_SIGNUP_RATE", "10/h")
TTS_PASSWORD_RESET_RATE = envstr("TTS_PASSWORD_RESET_RATE", "5/h")  # per address and per e-mail
TTS_INVITE_RATE = envstr("TTS_INVITE_RATE", "30/h")  # per inviting user
TTS_PLAYGROUND_ENCODE_RATE = envstr("TTS_PLAYGROUND_ENCODE_RATE", "30/m")  # playground downloads per member

# Dashboard sign-in (sessions); e-mail goes to the console unless SMTP is configured.
LOGIN_URL = "login"
# E-mail addresses are usernames, matched in any case (accounts.backends).
AUTHENTICATION_BACKENDS = ["accounts.backends.CaseInsensitiveEmailBackend"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"
EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_FILE_PATH = envstr("EMAIL_FILE_PATH", str(BASE_DIR / "var" / "mail"))  # the file-based backend's
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = envsecret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10)  # seconds: a slow mail server never holds a request
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "tts_saas <noreply@localhost>")
# Behind TLS in production (TTS_HTTPS=1): secure cookies, HSTS. The scheme a proxy reports in
# X-Forwarded-Proto is believed only when TTS_BEHIND_PROXY says a proxy sets it (else any client could).
if envbool("TTS_HTTPS", False):
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
    CSRF_TRUSTED_ORIGINS = [o for o in envstr("CSRF_TRUSTED_ORIGINS").split(",") if o]
if envbool("TTS_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# WhiteNoise serves static files (admin, API docs) from the ASGI app; without `collectstatic`
# it finds them in the apps, which is what a local run wants.
WHITENOISE_USE_FINDERS = envbool("WHITENOISE_USE_FINDERS", True)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["billing.policy.MeteredApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["tts_saas.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "tts_saas.errors.drf_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}

# Celery: each engine's synthesis on its own queue, "tts-<engine>" (GPU workers; the sender names
# the queue: synthesis.service.queue), everything light on "default".
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = envint("TTS_TASK_SOFT_TIME_LIMIT", 540)
CELERY_TASK_TIME_LIMIT = envint("TTS_TASK_TIME_LIMIT", 600)
# The Redis broker redelivers unacked tasks after this; it must exceed the longest task.
# Priorities 0 (served first: paid plans) to 9 on the Redis broker.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": envint("TTS_VISIBILITY_TIMEOUT", 3600),
    "priority_steps": list(range(10)),
    "queue_order_strategy": "priority",
}
CELERY_TASK_IGNORE_RESULT = True
# Each pool process loads the model after the fork; give it time (a first download can be long).
CELERY_WORKER_PROC_ALIVE_TIMEOUT = envint("TTS_MODEL_LOAD_TIMEOUT", 900)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_CONSUMER = "tts_saas.celery:Consumer"  # reconnects after every broker loss (see there)
DEFAULT_Q = {"queue": "default"}
CELERY_BEAT_SCHEDULE = {
    # A killed worker's jobs go to a live one within TTS_WORKER_HEARTBEAT_TTL + this.
    "rescue-lost-jobs": {
        "task": "synthesis.tasks.rescue_lost_jobs",
        "schedule": envfloat("TTS_RESCUE_SECONDS", 3.0),
        "options": {"queue": "default", "expires": 10},
    },
    "reap-stale-jobs": {"task": "synthesis.tasks.reap_stale_jobs", "schedule": 60.0, "options": {"queue": "default"}},
    "delete-old-jobs": {"task": "synthesis.tasks.delete_old_jobs", "schedule": 3600.0, "options": {"queue": "default"}},
    "check-usage-alerts": {"task": "synthesis.tasks.check_usage_alerts", "schedule": 60.0, "options": DEFAULT_Q},
    "expire-audit-events": {"task": "accounts.tasks.expire_audit_events", "schedule": 86400.0, "options": DEFAULT_Q},
    # Billing (does nothing unless STRIPE_SECRET_KEY is set).
    "report-usage": {
        "task": "billing.tasks.report_usage",
        "schedule": envfloat("STRIPE_REPORT_SECONDS", 60.0),
        "options": {"queue": "default", "expires": 50},
    },
    "enforce-dunning": {"task": "billing.tasks.enforce_dunning", "schedule": 600.0, "options": {"queue": "default"}},
}

# Billing through Stripe: without STRIPE_SECRET_KEY operators assign plans and nothing is charged.
STRIPE_SECRET_KEY = envsecret("STRIPE_SECRET_KEY")
STRIPE_WEBHOOK_SECRET = envsecret("STRIPE_WEBHOOK_SECRET")  # whsec_…, of the endpoint /billing/stripe/webhook
STRIPE_API_BASE = envstr("STRIPE_API_BASE")  # empty: Stripe's own; tests point it at a local fake
STRIPE_TIMEOUT = envfloat("STRIPE_TIMEOUT", 10.0)  # seconds per request to Stripe
STRIPE_MAX_NETWORK_RETRIES = envint("STRIPE_MAX_NETWORK_RETRIES", 2)  # the library's, with idempotency keys
STRIPE_PAYMENT_GRACE_DAYS = envfloat("STRIPE_PAYMENT_GRACE_DAYS", 7.0)  # payment failed -> suspended after
STRIPE_METER_BATCH = envint("STRIPE_METER_BATCH", 100)  # ledger rows sent per report run
STRIPE_WEBHOOK_TOLERANCE = envint("STRIPE_WEBHOOK_TOLERANCE", 300)  # seconds a signed event stays valid

# Synthesis service.
# The engines this deployment serves (inference/registry.py: chattts, kokoro, voxcpm), one worker queue
# each (tts-<engine>); an operator who sells speech serves kokoro and voxcpm (ChatTTS's weights are CC BY-NC).
TTS_ENGINES = [e.strip() for e in envstr("TTS_ENGINES", "chattts,kokoro").split(",") if e.strip()]
# The engine OpenAI's model names (tts-1, tts-1-hd, gpt-4o-mini-tts) and requests without `model` use;
# empty: the first of TTS_ENGINES whose audio may be sold, else the first (billing.offer.default_spec).
TTS_DEFAULT_MODEL = envstr("TTS_DEFAULT_MODEL")
# TTS_<ENGINE>_MODEL_DIR: each engine's model directory (TTS_MODEL_DIR: ChatTTS's old name); empty: its download.
TTS_MODEL_DIR = envstr("TTS_MODEL_DIR")
TTS_MODEL_DIRS = {
    "chattts": envstr("TTS_CHATTTS_MODEL_DIR", TTS_MODEL_DIR),
    "kokoro": envstr("TTS_KOKORO_MODEL_DIR"),
    "voxcpm": envstr("TTS_VOXCPM_MODEL_DIR"),
}
TTS_HF_CACHE_DIR = envstr("TTS_HF_CACHE_DIR")  # where those downloads are kept (HF default if empty)
TTS_DEVICE = envstr("TTS_DEVICE")  # empty: cuda when present, else cpu
TTS_PRECISION = envstr("TTS_PRECISION", "auto")  # the GPT's: auto (= fp32, measured best), fp32, bf16, int8 (CPU)
TTS_TORCH_THREADS = envint("TTS_TORCH_THREADS", 0)  # a worker's torch threads; 0: auto (the engine's rule)
TTS_MODEL_ALIASES = [a for a in envstr("TTS_MODEL_ALIASES", "tts-1,tts-1-hd,gpt-4o-mini-tts").split(",") if a]
TTS_MAX_INPUT_CHARS = envint("TTS_MAX_INPUT_CHARS", 4096)
TTS_MAX_JOB_CHARS = envint("TTS_MAX_JOB_CHARS", 200_000)  # an asynchronous job's input, at most (plans set less)
# An asynchronous job may run TTS_JOB_SECONDS_PER_CHAR seconds a character of its input (at least the
# task's soft limit): a long text is not cut off, a stuck one still ends.
TTS_JOB_SECONDS_PER_CHAR = envfloat("TTS_JOB_SECONDS_PER_CHAR", 0.5)
TTS_MAX_BODY_BYTES = envint("TTS_MAX_BODY_BYTES", 2 * 1024 * 1024)  # a 200,000-character job, escaped
DATA_UPLOAD_MAX_MEMORY_SIZE = TTS_MAX_BODY_BYTES  # Django stops reading a body past it
TTS_DEFAULT_SEED = envstr("TTS_DEFAULT_SEED")  # empty: an unseeded request gets a random seed
# A live request waits while the workers work through the queue. It is refused at once when its
# estimated wait is over TTS_MAX_QUEUE_WAIT, and given up when no worker has made progress for
# TTS_QUEUE_TIMEOUT (dead or stuck workers) or when it has not started within both together.
TTS_QUEUE_TIMEOUT = envfloat("TTS_QUEUE_TIMEOUT", 30.0)
TTS_MAX_QUEUE_WAIT = envfloat("TTS_MAX_QUEUE_WAIT", 120.0)
# Rows (segments of jobs) one synthesis worker process generates together. 0: the worker's engine
# decides at start (inference.base.default_max_batch: 4 on a CPU; on a GPU what half its free memory
# holds, at most 64).
TTS_MAX_BATCH = envint("TTS_MAX_BATCH", 0)
TTS_WORKER_MAX_MEMORY_MB = envint("TTS_WORKER_MAX_MEMORY_MB", 0)  # past it a worker leaves, to be restarted (0: never)
TTS_WORKER_METRICS_PORT = envint("TTS_WORKER_METRICS_PORT", 0)  # each synthesis worker's /metrics; 0: off
TTS_CONTINUOUS_BATCHING = envbool("TTS_CONTINUOUS_BATCHING", True)  # jobs join a running batch at a step
TTS_BATCH_GATHER_SECONDS = envfloat("TTS_BATCH_GATHER_SECONDS", 0.1)  # wait for companions once a job is in
# A worker renews its registration every TTL/4 s; one silent for TTL s is dead and its jobs are
# queued again (at most TTS_JOB_MAX_ATTEMPTS workers in all, then the job fails, refunded).
TTS_WORKER_HEARTBEAT_TTL = envint("TTS_WORKER_HEARTBEAT_TTL", 8)
TTS_JOB_MAX_ATTEMPTS = envint("TTS_JOB_MAX_ATTEMPTS", 2)
TTS_STREAM_TTL = envint("TTS_STREAM_TTL", 3600)  # seconds a job's chunk stream is kept
# Events a job's stream keeps (its last ones): ~0.5 s of audio each, so ~16 minutes; a request's audio
# fits, a long job's beginning is trimmed while it runs (its stored file has it all).
TTS_STREAM_MAX_EVENTS = envint("TTS_STREAM_MAX_EVENTS", 2000)
TTS_CACHE_TTL = envint("TTS_CACHE_TTL", 7 * 24 * 3600)
TTS_CACHE_MAX_BYTES = envint("TTS_CACHE_MAX_BYTES", 512 * 1024 * 1024)
TTS_CACHE_MAX_ENTRY_BYTES = envint("TTS_CACHE_MAX_ENTRY_BYTES", 16 * 1024 * 1024)
TTS_WARMUP = envbool("TTS_WARMUP", True)
METRICS_TOKEN = envsecret("METRICS_TOKEN")  # empty: /metrics is open (keep it off the public network)
TTS_STREAM_CHUNK_SECONDS = envfloat("TTS_STREAM_CHUNK_SECONDS", 0.5)  # audio per streamed chunk
TTS_JOB_QUEUE_TIMEOUT = envfloat("TTS_JOB_QUEUE_TIMEOUT", 3600)  # async jobs may wait this long for a worker
TTS_JOB_RETENTION_HOURS = envint("TTS_JOB_RETENTION_HOURS", 24 * 7)  # results and rows, then deleted
TTS_ZERO_RETENTION_HOLD_SECONDS = envint("TTS_ZERO_RETENTION_HOLD_SECONDS", 3600)  # a zero-retention job's audio
TTS_AUDIT_RETENTION_DAYS = envint("TTS_AUDIT_RETENTION_DAYS", 365)  # audit events, then deleted (daily)
TTS_WS_MAX_PER_ORG = envint("TTS_WS_MAX_PER_ORG", 200)  # open WebSocket connections per organization
TTS_WS_BUFFER_BYTES = envint("TTS_WS_BUFFER_BYTES", 4 * 1024 * 1024)  # per WebSocket, then close
MEDIA_ROOT = Path(envstr("MEDIA_ROOT", str(VAR_DIR / "media")))
STORAGES = {
    "default": {"BACKEND": envstr("TTS_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage")},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
TTS_BENCH_FIXED_LENGTH = envbool("TTS_BENCH_FIXED_LENGTH", False)  # benchmarks: generate to the budget

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "tts_saas.request_id.RequestIdFilter"}},
    "formatters": {"json": {"()": "tts_saas.request_id.json_formatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["request_id"]},
    },
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {"ChatTTS": {"level": "WARNING"}, "WETEXT": {"level": "WARNING"}},
}
