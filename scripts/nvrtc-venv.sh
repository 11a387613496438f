#!/usr/bin/env bash
# Makes target/nvrtc-venv with NVIDIA's NVRTC wheel (CUDA 13, the version
# cudarc's `cuda-13000` feature targets; ~58 MB download, ~150 MB installed),
# so `cargo test` can compile every VPPS kernel specialisation to PTX without
# a GPU (engine/replay/tests/vpps_nvrtc.rs). Offline-safe: if Python or the download
# is missing, it says so and exits 0, and the test skips visibly.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=target/nvrtc-venv
wheel="nvidia-cuda-nvrtc==13.5.37"
if compgen -G "$venv/lib/python*/site-packages/nvidia/cu13/lib/libnvrtc.so.13" >/dev/null; then
  echo "nvrtc-venv: $wheel already in $venv"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "nvrtc-venv: no python3: the NVRTC compile check will be skipped"
  exit 0
fi
mkdir -p target
if ! python3 -m venv "$venv" >/dev/null 2>&1; then
  echo "nvrtc-venv: cannot create $venv: the NVRTC compile check will be skipped"
  exit 0
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "${NVRTC_WHEEL:-$wheel}"; then
  echo "nvrtc-venv: pip could not install $wheel (offline?): the NVRTC compile check will be skipped"
  exit 0
fi
echo "nvrtc-venv: installed $wheel in $venv"
