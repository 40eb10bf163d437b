#!/usr/bin/env bash
# Installs the peer server Kokoro-FastAPI (remsky/Kokoro-FastAPI 0.8.1-rc1, commit 26eec06) for
# bench/kokoro_peer.py and bench/intelligibility.py, outside this repository, CPU only, offline
# (PyPI reachable, no model hub):
#
#     bench/peers/install_kokoro_fastapi.sh SRC_DIR [PREFIX=/opt/kfa]
#
# SRC_DIR is the unpacked source of that commit (`git archive 26eec06 | tar -x -C SRC_DIR`; where a
# mirror lacks a blob, as one here lacked examples/audio_analysis.png, git archive stops: write each
# blob of `git ls-tree -r 26eec06` with `git cat-file blob`, skipping the missing one);
# it is copied to PREFIX/src unless it is already there. Then:
#   1. PREFIX/venv (python3.11), torch==2.13.0 first (the CPU wheel; nothing may replace it);
#   2. its pyproject's dependencies at its uv.lock's versions, without the GPU extras and without
#      misaki[ja]'s `unidic` (its dictionary is a run-time download, and fugashi would pick it over
#      unidic-lite): misaki[en] + fugashi, unidic-lite, jaconv, mojimoji, pyopenjtalk (imported by
#      misaki.ja, never called on its default cutlet path); every transitive version pinned below;
#   3. an `en_core_web_sm` stand-in distribution whose load() returns spacy.blank("en")
#      (spaCy's model is not on PyPI; misaki downloads it when spacy.util.is_package says it is
#      missing, and this makes it say it is present);
#   4. PREFIX/start.sh PORT [random|real|CHECKPOINT_DIR] (see its header).
# Nothing in Kokoro-FastAPI's own files is changed.
set -euo pipefail

SRC_IN=${1:?usage: $0 SRC_DIR [PREFIX]}
PREFIX=${2:-/opt/kfa}
PY=${PYTHON:-python3.11}
SRC_IN=$(cd "$SRC_IN" && pwd)
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
SRC=$PREFIX/src
VENV=$PREFIX/venv

if [ "$SRC_IN" != "$SRC" ]; then
  rm -rf "$SRC"
  mkdir -p "$SRC"
  cp -a "$SRC_IN/." "$SRC/"
fi
[ -f "$SRC/api/src/main.py" ] || { echo "not a Kokoro-FastAPI source tree: $SRC" >&2; exit 1; }
echo "Kokoro-FastAPI $(cat "$SRC/VERSION" 2>/dev/null || echo '?') in $SRC"

# 1. venv, torch first
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip
"${PIP[@]}" install torch==2.13.0
"$VENV/bin/python" - <<'EOF'
import torch
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert torch.version.cuda is None, f"a CUDA torch was installed: {torch.__version__}"
print("torch", torch.__version__, "(CPU)")
EOF

# 2. its dependencies (pyproject's, at uv.lock's versions), every transitive version pinned
CONSTRAINTS=$(mktemp)
trap 'rm -f "$CONSTRAINTS"' EXIT
cat > "$CONSTRAINTS" <<'EOF'
torch==2.13.0
addict==2.4.0
aiofiles==23.2.1
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
attrs==26.1.0
av==16.1.0
babel==2.19.0
blis==1.3.4
catalogue==2.0.10
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cloudpathlib==0.26.0
cloudpickle==3.1.3
confection==0.1.5
csvw==4.1.1
curated-tokenizers==0.0.10
curated-transformers==0.1.1
cymem==2.0.16
distro==1.9.0
dlinfo==2.0.0
docopt==0.6.2
espeakng-loader==0.2.4
fastapi==0.141.1
filelock==4.3.2
fsspec==2026.9.0
fugashi==1.5.2
greenlet==3.5.6
h11==0.16.0
hf-xet==1.8.0
httpcore==1.0.9
httpx==0.29.0
huggingface_hub==1.33.0
idna==3.21
inflect==7.5.0
isodate==0.7.2
jaconv==0.5.0
Jinja2==3.1.6
jiter==0.19.0
joblib==1.6.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
kokoro==0.9.4
langcodes==3.5.1
language-tags==1.3.2
loguru==0.7.3
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
misaki==0.9.4
mojimoji==0.0.13
more-itertools==11.2.1
mpmath==1.3.0
munch==4.0.0
murmurhash==1.0.16
mutagen==1.47.0
networkx==3.6.1
num2words==0.5.14
numpy==2.2.6
openai==2.26.0
packaging==26.4
phonemizer-fork==3.3.2
preshed==3.0.15
psutil==7.2.2
pycparser==3.12
pydantic==2.10.4
pydantic-settings==2.7.0
pydantic_core==2.27.2
Pygments==2.21.0
pyopenjtalk==0.4.1
pyparsing==3.3.3
python-dateutil==4.0.0
python-dotenv==1.2.2
PyYAML==6.0.4
rdflib==7.6.0
referencing==0.37.0
regex==2026.7.19
requests==2.33.0
rfc3986==1.5.0
rich==15.0.0
rpds-py==2026.9.1
safetensors==0.8.0
scipy==1.14.1
segments==2.4.0
shellingham==1.5.4
smart_open==7.7.1
sniffio==1.3.1
soundfile==0.13.0
spacy==3.8.5
spacy-curated-transformers==0.3.1
spacy-legacy==3.0.12
spacy-loggers==1.0.5
SQLAlchemy==2.0.27
srsly==2.5.6
starlette==1.4.1
sympy==1.14.0
termcolor==3.3.0
text2num==3.0.0
thinc==8.3.11
tiktoken==0.8.0
tokenizers==0.22.2
tqdm==4.67.1
transformers==5.14.1
typeguard==4.6.1
typer==0.29.2
typer-slim==0.24.0
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
unidic-lite==1.0.8
uritemplate==4.2.0
urllib3==2.8.0
uvicorn==0.34.0
wasabi==1.1.3
weasel==0.4.3
wrapt==2.5.2
EOF
"${PIP[@]}" install -c "$CONSTRAINTS" \
  torch==2.13.0 \
  "fastapi==0.141.1" "starlette==1.4.1" "uvicorn==0.34.0" "click>=8.0.0" \
  "pydantic==2.10.4" "pydantic-settings==2.7.0" "python-dotenv==1.2.2" "sqlalchemy==2.0.27" \
  "numpy==2.2.6" "scipy==1.14.1" "soundfile==0.13.0" "regex==2026.7.19" "aiofiles==23.2.1" \
  "tqdm==4.67.1" "requests==2.33.0" "munch==4.0.0" "tiktoken==0.8.0" "loguru==0.7.3" \
  "openai==2.26.0" "mutagen==1.47.0" "psutil==7.2.2" "espeakng-loader==0.2.4" \
  "kokoro==0.9.4" "transformers==5.14.1" "misaki[en]==0.9.4" "spacy==3.8.5" \
  "inflect==7.5.0" "phonemizer-fork==3.3.2" "av==16.1.0" "text2num==3.0.0" \
  "fugashi==1.5.2" "unidic-lite==1.0.8" "jaconv==0.5.0" "mojimoji==0.0.13" "pyopenjtalk==0.4.1"

# 3. en_core_web_sm stand-in: spacy.blank("en")
STUB=$(mktemp -d)
mkdir -p "$STUB/en_core_web_sm"
cat > "$STUB/en_core_web_sm/__init__.py" <<'EOF'
"""Stand-in for spaCy's en_core_web_sm (not downloadable here): a blank English pipeline.

misaki's G2P checks spacy.util.is_package("en_core_web_sm") (satisfied by this distribution, so it
never calls spacy.cli.download) and then spacy.load("en_core_web_sm", enable=[...]), which imports
this package and calls load(): it gets spacy.blank("en") (a tokenizer, no tagger: no POS tags).
"""
import spacy


def load(**overrides):
    return spacy.blank("en")
EOF
cat > "$STUB/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools>=61.0"]
build-backend = "setuptools.build_meta"

[project]
name = "en_core_web_sm"
version = "3.8.0+blank"
description = "Stand-in for spaCy en_core_web_sm: load() returns spacy.blank('en')"
dependencies = ["spacy"]

[tool.setuptools]
packages = ["en_core_web_sm"]
EOF
"${PIP[@]}" install --no-build-isolation --no-deps --force-reinstall "$STUB"
rm -rf "$STUB"

# 4. start.sh
cat > "$PREFIX/start.sh" <<EOF
#!/usr/bin/env bash
# Kokoro-FastAPI on 127.0.0.1:PORT, CPU, offline:
#
#     $PREFIX/start.sh PORT [random|real|CHECKPOINT_DIR]
#
# Which checkpoint (a directory holding kokoro-v1_0.pth, config.json and voices/*.pt):
#   the 2nd argument, else \$KFA_WEIGHTS (random|real|a directory), else "auto":
#   real   when the process that started this (an ancestor) is bench/intelligibility.py or was
#          given --weights real (bench/kokoro_peer.py), those being the runs on the real weights;
#   else random (kokoro-full) when it exists, else real.
#   random = \$KFA_CHECKPOINTS/kokoro-full, real = \$KFA_CHECKPOINTS/kokoro-real
#   (KFA_CHECKPOINTS default /work/main/var/checkpoints).
# At each start, PREFIX/run/PORT/ is made anew: models/v1_0 -> the checkpoint directory (its
# kokoro-v1_0.pth and config.json: Kokoro-FastAPI reads config.json beside the resolved .pth),
# voices/ with a link to each of the checkpoint's voices, then to those of kokoro-real and
# kokoro-full whose names are not taken yet; tmp/ as TMPDIR (Kokoro-FastAPI caches each voice as
# \$TMPDIR/temp_voice_NAME.pt and never refreshes it: per start, so no stale voice from another
# checkpoint). DEFAULT_VOICE (its warm-up voice) unless set: af_heart if the checkpoint has it,
# else jf_alpha, else its first voice. torch's default threads.
set -euo pipefail
PORT=\${1:?usage: \$0 PORT [random|real|CHECKPOINT_DIR]}
WHICH=\${2:-\${KFA_WEIGHTS:-auto}}
PREFIX=$PREFIX
SRC=\$PREFIX/src
CKROOT=\${KFA_CHECKPOINTS:-/work/main/var/checkpoints}

if [ "\$WHICH" = auto ]; then
  WHICH=""
  pid=\$PPID
  while [ -n "\$pid" ] && [ "\$pid" -gt 1 ] 2>/dev/null; do
    cmd=\$(tr '\\0' ' ' < /proc/\$pid/cmdline 2>/dev/null || true)
    case "\$cmd" in
      *intelligibility.py*|*"--weights real"*|*"--weights=real"*) WHICH=real; break ;;
      *kokoro_peer.py*) WHICH=random; break ;;
    esac
    pid=\$(awk '{print \$4}' /proc/\$pid/stat 2>/dev/null || true)
  done
  if [ -z "\$WHICH" ]; then
    if [ -f "\$CKROOT/kokoro-full/kokoro-v1_0.pth" ]; then WHICH=random; else WHICH=real; fi
  fi
fi
case "\$WHICH" in
  random|full) CK=\$CKROOT/kokoro-full ;;
  real) CK=\$CKROOT/kokoro-real ;;
  *) CK=\$WHICH ;;
esac
CK=\$(cd "\$CK" 2>/dev/null && pwd) || { echo "start.sh: no checkpoint directory \$WHICH" >&2; exit 1; }
for f in kokoro-v1_0.pth config.json; do
  [ -f "\$CK/\$f" ] || { echo "start.sh: \$CK/\$f missing" >&2; exit 1; }
done

RUN=\$PREFIX/run/\$PORT
rm -rf "\$RUN"
mkdir -p "\$RUN/models" "\$RUN/voices" "\$RUN/tmp"
ln -s "\$CK" "\$RUN/models/v1_0"
for dir in "\$CK/voices" "\$CKROOT/kokoro-real/voices" "\$CKROOT/kokoro-full/voices"; do
  [ -d "\$dir" ] || continue
  for v in "\$dir"/*.pt; do
    [ -e "\$v" ] || continue
    [ -e "\$RUN/voices/\$(basename "\$v")" ] || ln -s "\$v" "\$RUN/voices/"
  done
done
if [ -z "\${DEFAULT_VOICE:-}" ]; then
  if [ -f "\$CK/voices/af_heart.pt" ]; then DEFAULT_VOICE=af_heart
  elif [ -f "\$CK/voices/jf_alpha.pt" ]; then DEFAULT_VOICE=jf_alpha
  else DEFAULT_VOICE=\$(basename "\$(ls "\$RUN/voices" | head -1)" .pt); fi
fi
echo "start.sh: Kokoro-FastAPI on 127.0.0.1:\$PORT, checkpoint \$CK, \$(ls "\$RUN/voices" | wc -l) voices, default voice \$DEFAULT_VOICE"

export DEFAULT_VOICE
export USE_GPU=false DEVICE_TYPE=cpu
export HOST=127.0.0.1 PORT
export MODEL_DIR=\$RUN/models VOICES_DIR=\$RUN/voices TMPDIR=\$RUN/tmp
export WEB_PLAYER_PATH=\$SRC/web
export PYTHONPATH=\$SRC:\$SRC/api
export PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
cd "\$SRC"
exec "\$PREFIX/venv/bin/python" -m uvicorn api.src.main:app --host 127.0.0.1 --port "\$PORT"
EOF
chmod +x "$PREFIX/start.sh"

# check: the app's modules import, G2P offline
(cd "$SRC" && PYTHONPATH="$SRC:$SRC/api" HF_HUB_OFFLINE=1 USE_GPU=false "$VENV/bin/python" - <<'EOF'
import spacy
assert spacy.util.is_package("en_core_web_sm")
from misaki import en, espeak, ja
g2p = en.G2P(trf=False, british=False, fallback=espeak.EspeakFallback(british=False), unk="")
print("en G2P:", g2p("Hello there.")[0], "| ja G2P:", ja.JAG2P()("こんにちは")[0])
import api.src.main  # noqa: F401
import kokoro, misaki, torch, transformers
print("ok: kokoro", kokoro.__version__, "misaki", misaki.__version__, "torch", torch.__version__, "transformers", transformers.__version__)
EOF
)
"${PIP[@]}" freeze > "$PREFIX/pip-freeze.txt"
echo "installed: $PREFIX/start.sh PORT [random|real|CHECKPOINT_DIR]"
