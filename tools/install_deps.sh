#!/usr/bin/env bash
# Installs the Debian packages ganengine builds and tests with, when they are missing.
#   tools/install_deps.sh          what tools/build.sh needs
#   tools/install_deps.sh --lint   also clang-format and clang-tidy (version 14 on Debian 12), for
#                                  tools/format.sh and tools/tidy.sh (tools/test.sh runs both)
#   tools/install_deps.sh --fuzz   also clang 14 with its sanitizer and libFuzzer runtimes, for
#                                  tools/fuzz.sh (tools/test.sh runs it)
# The CUDA toolkit (nvcc, cuDNN, cuBLAS) is expected under /usr/local/cuda; without it the
# engine still builds, CPU backend only.
set -euo pipefail
packages=(cmake make g++ pkg-config libcxxopts-dev libstb-dev doctest-dev zlib1g-dev libturbojpeg0-dev libwebp-dev libtiff-dev liblmdb-dev libcurl4-openssl-dev libdnnl-dev ocl-icd-opencl-dev dataset-fashion-mnist python3 python3-venv openmpi-bin)
case "${1:-}" in
  "") ;;
  --lint) packages+=(clang-format clang-tidy) ;;
  --fuzz) packages+=(clang-14 libclang-rt-14-dev) ;;
  *) echo "usage: $0 [--lint | --fuzz]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install_deps] installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
