#!/usr/bin/env bash
# Build the wheel, install it into a fresh venv outside the checkout with no compiler on PATH and
# without the llm extra, and run `memrefine demo` there: the package and its dependencies install
# without a native build, the installed package finds its manifest (package data), fetches its
# models into the user data dir and compresses the bundled sample, and a GGUF option fails with one
# line naming the llm extra.
# Run by CI; needs scripts/bootstrap.sh first (its .venv builds the wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[check_wheel] $*" >&2; }

PY=.venv/bin/python
work=$(mktemp -d "${TMPDIR:-/tmp}/memrefine-wheel-XXXXXX")
RM=$(command -v rm)
trap '"$RM" -rf "$work"' EXIT
say "building the wheel"
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/dist" . >&2
wheel=$(ls "$work"/dist/memrefine_edge-*.whl)
python3 -m venv "$work/venv"

# From here on no compiler: PATH is the fresh venv's bin and an empty folder, CC and CXX name a
# compiler that fails, and pip's cache is off (a wheel built earlier with a compiler is not reused).
mkdir "$work/bin"
export PATH="$work/venv/bin:$work/bin" CC=false CXX=false
for compiler in cc gcc c++ g++ clang clang++ make cmake; do
  if command -v "$compiler" >/dev/null; then say "a compiler is still on PATH: $compiler"; exit 1; fi
done
say "installing $(basename "$wheel") into a fresh venv, without a compiler and without the llm extra"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir "$wheel"
if "$work/venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llama_cpp') is None)"; then
  say "llama_cpp is installed, but the plain wheel must not pull it in (it is the llm extra)"; exit 1
fi

cd "$work"  # outside the checkout: nothing of the repository is on the path
unset MEMREFINE_MODELS MEMREFINE_MANIFEST MEMREFINE_DB
export XDG_DATA_HOME="$work/data"  # the user data dir, private to this check
say "fetching the models into the user data dir"
"$work/venv/bin/memrefine" models fetch
test -f "$XDG_DATA_HOME/memrefine_edge/models/all-MiniLM-L6-v2-int8.onnx"
say "running the demo"
"$work/venv/bin/memrefine" demo --json > "$work/demo.json"
"$work/venv/bin/python" - "$work/demo.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["after"]["entries"] < report["before"]["entries"], report
print(f"[check_wheel] ok: demo {report['before']['json_bytes']:,} -> {report['after']['json_bytes']:,} B json, "
      f"{report['before']['entries']} -> {report['after']['entries']} entries", file=sys.stderr)
PY
say "a GGUF judge without the llm extra"
printf '%s\n' '{"id": "p1", "a": "Ana moved to Lisbon.", "b": "Ana lives in Lisbon.", "similarity": 0.9}' > pairs.jsonl
status=0
"$work/venv/bin/memrefine" judge-pairs pairs.jsonl --judge-model bundled > out.txt 2> err.txt || status=$?
"$work/venv/bin/python" - "$status" err.txt <<'PY'
import sys
status, err = int(sys.argv[1]), open(sys.argv[2], encoding="utf-8").read().strip().splitlines()
assert status == 1 and len(err) == 1 and err[0].startswith("Error: "), (status, err)
assert "pip install 'memrefine-edge[llm]'" in err[0], err
print(f"[check_wheel] ok: {err[0][:120]}...", file=sys.stderr)
PY
