#!/usr/bin/env bash
# Build the wheel, install it into a fresh venv outside the checkout, and run
# `memrefine demo` there: the installed package must find its manifest (package
# data), fetch its models into the user data dir, and compress the bundled sample.
# Run by CI after the tests; needs scripts/bootstrap.sh first (the llama.cpp wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[check_wheel] $*" >&2; }

PY=.venv/bin/python
work=$(mktemp -d "${TMPDIR:-/tmp}/memrefine-wheel-XXXXXX")
trap 'rm -rf "$work"' EXIT
say "building the wheel"
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/dist" . >&2
wheel=$(ls "$work"/dist/memrefine_edge-*.whl)
say "installing $(basename "$wheel") into a fresh venv"
python3 -m venv "$work/venv"
llama_dir=$(dirname "$(ls "$("$PY" -m pip cache dir)"/memrefine-llama/*/llama_cpp_python-*.whl | head -n1)")
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --find-links "$llama_dir" "$wheel"
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
