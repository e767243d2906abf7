#!/usr/bin/env bash
# Runs a Python test of tests/python with the cached environment scripts/test_data.sh made.
# Usage: run_python_test.sh PYTHON MODEL|- SCRIPT ARGS...   (MODEL "-": the test needs none)
# Exit 77 (ctest: skipped) with the reason when the environment or the model is missing, unless
# KVLAB_REQUIRE_TEST_DATA=1, when that is a failure.
python=$1 model=$2
shift 2
missing=""
[ -x "$python" ] || missing="the Python environment $python"
[ "$model" = - ] || [ -f "$model" ] || missing="${missing:+$missing and }the model $model"
if [ -n "$missing" ]; then
  echo "kvlab: $missing is missing; run scripts/test_data.sh to fetch it"
  [ "${KVLAB_REQUIRE_TEST_DATA:-0}" = 1 ] && exit 1
  exit 77
fi
exec "$python" "$@"
