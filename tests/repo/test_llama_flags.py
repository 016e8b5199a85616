"""The llama.cpp build flags bootstrap.sh picks for the machine's architecture."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "llama_flags.sh"

X86_FLAGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"


def flags(*arch: str) -> list[str]:
    out = subprocess.run(["bash", str(SCRIPT), *arch], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("arch", ["x86_64", "amd64"])
def test_x86_64_keeps_the_avx2_era_set(arch):
    # Byte for byte the set the cached wheels were built with (the cache key hashes it).
    assert " ".join(flags(arch)) == X86_FLAGS


@pytest.mark.parametrize("arch", ["aarch64", "arm64"])
def test_arm64_gets_a_portable_armv8_set_and_no_x86_flags(arch):
    got = flags(arch)
    assert "-DGGML_NATIVE=OFF" in got
    assert "-DGGML_CPU_ARM_ARCH=armv8-a" in got
    assert not [f for f in got if "AVX" in f or "FMA" in f or "F16C" in f or "BMI2" in f]


@pytest.mark.parametrize("arch", ["riscv64", "armv7l", "ppc64le", "s390x"])
def test_other_architectures_get_the_generic_non_native_build(arch):
    assert flags(arch) == ["-DGGML_NATIVE=OFF"]


def test_without_an_argument_it_names_this_machine():
    assert flags() == flags(platform.machine())


def test_bootstrap_builds_with_the_flags_the_script_prints():
    text = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    assert "scripts/llama_flags.sh" in text
    assert "-DGGML_AVX2" not in text  # no architecture's flags written into bootstrap itself
