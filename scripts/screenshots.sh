#!/usr/bin/env bash
# Regenerates the README's screenshots (docs/screenshots/*.png): renders every view of the real
# app offscreen with `kvlab-gui --screenshot`, on a fresh runs database so the pictures show the
# built-in default data. Builds kvlab-gui first when it is missing (run ./scripts/quickstart.sh
# once before, for the packages).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
gui=build/release/app/gui/kvlab-gui
[ -x "$gui" ] || cmake --build --preset release -j "${KVLAB_JOBS:-2}" --target kvlab-gui
out=docs/screenshots
db=$(mktemp -d)/runs.sqlite
trap 'rm -rf "$(dirname "$db")"' EXIT
rm -f "$out"/*.png
QT_QPA_PLATFORM=offscreen "$gui" --db "$db" --screenshot "$out"
ls "$out"
