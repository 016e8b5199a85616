#!/usr/bin/env bash
# The CMake flags scripts/bootstrap.sh builds llama-cpp-python with, for a machine
# architecture as `uname -m` names it (default: this machine's):
#   scripts/llama_flags.sh [ARCH]
# Every set turns GGML_NATIVE off: a native build tunes itself to the CPU it was
# built on (and on some x86 CPUs enables AMX, which segfaulted in
# ggml_backend_amx_mul_mat), so a cached wheel could crash on a sibling machine.
#   x86-64:  the AVX2-era set (AVX, AVX2, FMA, F16C, BMI2), portable and fast.
#   aarch64: plain ARMv8-A (-march=armv8-a), which every 64-bit ARM CPU runs,
#            Raspberry Pi 3/4 included (no dotprod or i8mm assumed).
#   others:  llama.cpp's generic build.
set -euo pipefail
arch=${1:-$(uname -m)}
case "$arch" in
  x86_64|amd64)
    echo "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" ;;
  aarch64|arm64)
    echo "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8-a" ;;
  *)
    echo "-DGGML_NATIVE=OFF" ;;
esac
