"""The last step of the reference scripts in tests/python that write files for an engine test:
run kvlab_engine_tests' test on them, and fail unless it passed having compared them (a test that
finds no files skips, which must not count as agreement)."""
import os
import subprocess


def run_engine_test(engine_tests, gtest_filter, env_var, out_dir, name):
    """0 when `gtest_filter` (one test) passed on the files in out_dir (given as env_var), else 1."""
    env = dict(os.environ, **{env_var: os.path.abspath(out_dir)})
    run = subprocess.run([engine_tests, f"--gtest_filter={gtest_filter}"], env=env,
                         capture_output=True, text=True)
    print(run.stdout[-4000:], run.stderr[-2000:])
    if run.returncode != 0:
        return 1
    if "[  SKIPPED ]" in run.stdout or "[  PASSED  ] 1 test" not in run.stdout:
        print(f"{name}: the engine test did not compare the bytes")
        return 1
    return 0
