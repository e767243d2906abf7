#!/usr/bin/env bash
# Builds the Debian package and checks it on a fresh root: configures a CPU-only release build in
# build/package (no tests, no benchmarks), runs cpack, checks that apt can satisfy the package's
# dependencies, unpacks it into an empty directory and runs `kvlab --help`, a planner command and
# `kvlab-gui --screenshot` from there, with nothing from the build tree on any path.
# Usage: scripts/package_test.sh [BUILD_DIR]   (KVLAB_JOBS sets the build's parallelism)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/package}
jobs=${KVLAB_JOBS:-2}

need=(dpkg-dev file)
for p in "${need[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "$p"
  fi
done

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVLAB_CUDA=OFF -DKVLAB_NATIVE=OFF \
  -DKVLAB_BUILD_TESTS=OFF -DKVLAB_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target kvlab kvlab-gui
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls -t "$build"/kvlab_*.deb | head -n 1)
echo "kvlab: package $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'

# Every dependency must be installable from the configured Debian archives (or already there).
deps=$(dpkg-deb -f "$deb" Depends)
[ -n "$deps" ] || { echo "kvlab: the package declares no dependencies" >&2; exit 1; }
apt-get install --simulate --no-install-recommends "$deb" >/dev/null

fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
dpkg-deb -x "$deb" "$fresh"
for f in usr/bin/kvlab usr/bin/kvlab-gui usr/share/applications/kvlab.desktop \
  usr/share/icons/hicolor/256x256/apps/kvlab.png usr/share/doc/kvlab/README.md; do
  [ -e "$fresh/$f" ] || { echo "kvlab: the package lacks /$f" >&2; exit 1; }
done
cd "$fresh"
env -i PATH=/usr/bin:/bin HOME="$fresh" "$fresh/usr/bin/kvlab" --help >/dev/null
env -i PATH=/usr/bin:/bin HOME="$fresh" "$fresh/usr/bin/kvlab" plan --model llama-3-8b \
  --gpu h100-sxm --context 8192 >/dev/null
# The screenshot mode saves its demo runs into a database of its own: the user's ($KVLAB_DB here,
# holding one run) is the same file, byte for byte, afterwards (issue 42).
user_db="$fresh/user-runs.sqlite"
env -i PATH=/usr/bin:/bin HOME="$fresh" KVLAB_DB="$user_db" "$fresh/usr/bin/kvlab" compress \
  --source synthetic:tiny --method int8 --save >/dev/null
before=$(sha256sum "$user_db" | cut -d' ' -f1)
env -i PATH=/usr/bin:/bin HOME="$fresh" KVLAB_DB="$user_db" QT_QPA_PLATFORM=offscreen \
  "$fresh/usr/bin/kvlab-gui" --screenshot "$fresh/shots" >/dev/null
n=$(ls "$fresh/shots"/*.png | wc -l)
[ "$n" -ge 5 ] || { echo "kvlab: kvlab-gui --screenshot wrote $n PNGs" >&2; exit 1; }
[ "$(sha256sum "$user_db" | cut -d' ' -f1)" = "$before" ] ||
  { echo "kvlab: kvlab-gui --screenshot changed the user's database $user_db" >&2; exit 1; }
runs=$(env -i PATH=/usr/bin:/bin HOME="$fresh" KVLAB_DB="$user_db" "$fresh/usr/bin/kvlab" runs list \
  --json | grep -c '"id"')
[ "$runs" -eq 1 ] || { echo "kvlab: the user's database holds $runs runs after --screenshot" >&2; exit 1; }
echo "kvlab: package OK ($(du -h "$deb" | cut -f1)); kvlab and kvlab-gui ran from a fresh root ($n screenshots)"
