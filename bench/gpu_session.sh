#!/usr/bin/env bash
# One lease's device checks for the GPU engine (issues 44 and 46), run there after
# ../shared/gpu/pack.sh, in two calls of the device tool (carry .gpu), the second at once after
# the first (a lease is 15 device minutes, its start included):
#   bash .gpu/run.sh 'STEPS="tests bench" NCU=1 BUDGET=420 bash bench/gpu_session.sh'
#   bash .gpu/run.sh 'STEPS="runs store sanitizer" BUDGET=<budget_left_s - 60> bash bench/gpu_session.sh'
# In order of importance, each step cut short when the call's budget (BUDGET seconds, default
# 420) runs out, so whatever ran comes back:
#   1. the GPU tests (tests.txt);
#   2. `kvlab bench gpu --json` (bench_gpu.json): every fused kernel against the fused fp16
#      decode kernel and cuBLAS;
#   3. with NCU=1, an Nsight Compute profile of each attention kernel at 32K (ncu.csv;
#      NCU_KERNELS names which), for bench/gpu_kernels_report.py --ncu;
#   4. whole runs on --backend cuda and cpu side by side (synthetic llama3-8b, 32 layers), and
#      their report against issue 44's targets (run_report.txt, gpu_run_<gpu>.json, with the
#      device machine's description: copy it to bench/results/ as it is, rather than running
#      run_report.py again elsewhere, and run scripts/perf_doc.py --out docs/PERFORMANCE.md);
#   5. a stored cache's decode steps attending on the GPU (issue 47, `kvlab generate --backend
#      cuda`: rows appended to the GPU's copy, the query up and the output back each step) beside
#      the same stores attending on the host's CPU, a Llama-3-8B layer at 8K and 32K
#      (store_decode.json: `kvlab bench cpu --backend cuda` and `kvlab bench cpu`);
#   6. compute-sanitizer memcheck, racecheck and synccheck on small runs and the kernel tests
#      (sanitizer.txt).
# STEPS limits what runs (default "tests bench runs store sanitizer"). The steps' stderr goes to
# errors.txt; at most eight files come back from a lease, so nothing else is written there.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
budget=${BUDGET:-420}
steps=${STEPS:-tests bench runs store sanitizer}
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
# A timeout of at most $1 seconds and at most what the budget has left, never below 1 (timeout 0
# would mean no limit at all). Callers check left() before a step.
cap() {
  local l; l=$(left)
  [ "$l" -lt 1 ] && l=1
  [ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
# timeout, killing a tool that ignores SIGTERM 5 s later.
limit() { timeout -k 5 "$@"; }
has() { [[ " $steps " == *" $1 "* ]]; }

device=$(nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | head -n 1)
echo "$device, $(nproc) host cores"

if has tests; then
  limit "$(cap 200)" kvlab_kernel_tests > "$out/tests.txt" 2>&1
  echo "kernel tests rc=$?" >> "$out/tests.txt"
  limit "$(cap 60)" kvlab_backend_ops_tests >> "$out/tests.txt" 2>&1
  echo "backend ops tests rc=$?" >> "$out/tests.txt"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |rc=" "$out/tests.txt" | head -n 40
fi

if has bench && [ "$(left)" -gt 30 ]; then
  # One context a run, so that a run cut short by its cap loses one context, not the file. The
  # one-pass kernels with 1, 8 and 32 sequences a launch (issue 46 part 4); 32 at 128K would
  # need 17 GB of fp16 copies, so 128K stops at 8.
  for ctx in 16384 32768 131072; do
    [ "$(left)" -gt 20 ] || break
    batches=1,8,32; [ "$ctx" -gt 32768 ] && batches=1,8
    limit "$(cap 90)" kvlab bench gpu --json --contexts "$ctx" --batches "$batches" \
      --repeats 100 > "$out/bench_gpu_$ctx.json" 2>> "$out/errors.txt"
    echo "bench gpu $ctx rc=$?" >> "$out/errors.txt"
  done
  python3 - "$out" <<'EOF' || tail -n 5 "$out/errors.txt"
import glob, json, os, sys
parts = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench_gpu_*.json")),
                key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0])):
    try:
        parts.append(json.load(open(f)))
    except ValueError:
        print("no JSON in", f)
    os.remove(f)
if not parts:
    sys.exit("no bench gpu output to merge (see errors.txt)")
j = dict(parts[0])
j["rows"] = [r for p in parts for r in p["rows"]]
j["encode"] = [e for p in parts for e in p.get("encode", [])]
j["skipped"] = [x for p in parts for x in p.get("skipped", [])]
for x in j["skipped"]:
    print("left out:", x)
json.dump(j, open(os.path.join(sys.argv[1], "bench_gpu.json"), "w"), indent=1)
print(j["device"], "copy", round(j["copy_gb_s"]), "GB/s")
for r in j["rows"]:
    print(f'{r["kernel"]:<16} {r["context"]:>7} {r["microseconds"]:>9.1f} us '
          f'{100 * r.get("copy_fraction", 0):>4.0f}% copy  '
          f'x{r["speedup_vs_cublas_fp16"]:.2f} cublas  x{r.get("speedup_vs_fp16_fused", 0):.2f} fused')
EOF
fi

if [ "${NCU:-0}" = 1 ] && [ "$(left)" -gt 30 ]; then
  # One launch of each attention kernel at 32K (after the bench's three warm-up launches), as CSV
  # appended to ncu.csv with the warps' stall reasons, for `bench/gpu_kernels_report.py --ncu`
  # (what bounds each kernel: issue 46 part 5).
  stalls=""
  for r in long_scoreboard short_scoreboard barrier membar mio_throttle lg_throttle wait \
           math_pipe_throttle tex_throttle not_selected selected no_instruction dispatch_stall \
           drain branch_resolving imc_miss sleeping; do
    stalls="$stalls${stalls:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  # The application ended once its one launch is profiled, where this ncu knows how.
  kill=(); ncu --help 2>/dev/null | grep -q -- "--kill" && kill=(--kill yes)
  one=$(mktemp)
  : > "$out/ncu.csv"
  for k in ${NCU_KERNELS:-decode_attention_kernel logits_kernel values_kernel rans_logits_kernel \
           rans_values_kernel packed_logits_kernel packed_values_kernel fp8_logits_kernel \
           fp8_values_kernel}; do
    [ "$(left)" -gt 15 ] || break
    profile() {
      limit "$(cap 40)" ncu --clock-control none --csv --page details --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        --section WarpStateStats "${kill[@]}" "$@" -k "regex:^${k}" --launch-skip 3 -c 1 \
        kvlab bench gpu --contexts 32768 --repeats 7 --batches 1 > "$one" 2>&1
    }
    profile --metrics "$stalls"
    rc=$?
    # Again without the stall metrics only where this ncu did not know one of them (not after a
    # timeout, which would only repeat it).
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qi "metric" "$one"; then
      profile
      rc=$?
    fi
    cat "$one" >> "$out/ncu.csv"
    # A machine where ncu cannot profile at all (no counters): the others would fail the same.
    if [ "$rc" -ne 0 ] && grep -q "==ERROR==" "$one" && ! grep -q '"ID"' "$one"; then
      echo "ncu failed on $k (rc=$rc); no more profiles" >> "$out/errors.txt"
      break
    fi
  done
  rm -f "$one"
  [ -f "$out/bench_gpu.json" ] &&
    python3 bench/gpu_kernels_report.py "$out/bench_gpu.json" --ncu "$out/ncu.csv" | head -n 14
fi

run() {  # seconds context backend method...
  local limit ctx=$2 be=$3; limit=$(cap "$1"); shift 3
  [ "$limit" -gt 5 ] || return 0
  limit "$limit" kvlab compress --source synthetic:llama3-8b --context "$ctx" --backend "$be" \
    "$@" --json 2>> "$out/errors.txt" | python3 -c '
import json, sys
j = json.load(sys.stdin)
t = j["timings"]
print(json.dumps({"ctx": j["tokens"], "method": j["method_label"], "backend": j["backend"]["id"],
  "stages": j.get("stage_backends"), "compress_s": t["total_s"], "source_s": t["source_s"],
  "q": t["quantize_s"], "c": t["code_s"], "d": t["dequantize_s"], "m": t["metrics_s"],
  "ratio": j["ratio"], "mse": j["error"]["mse"], "kl": j["error"]["softmax_kl"],
  "out_err": j["error"]["attn_output_rel_error"], "dev_peak": j["memory"].get("device_peak_bytes"),
  "host_peak": j["memory"]["peak_bytes"]}))' >> "$out/runs.jsonl" || echo "{\"failed\": \"$ctx $be $*\"}" >> "$out/runs.jsonl"
}
if has runs; then
  # Issue 44's targets: six methods at 32K (<= 1 s) and 128K (<= 4 s) on the GPU, and cuda no
  # slower than cpu at 1K and 32K.
  methods=("--method int8" "--method kvcomp --codec huffman" "--method kivi --bits 2"
           "--method fp8-e4m3" "--method q4_0" "--method nvfp4")
  # The targets first (a run the budget cuts loses the least important ones).
  for m in "${methods[@]}"; do run 60 32768 cuda $m; done
  for m in "${methods[@]}"; do run 90 131072 cuda $m; done
  for m in "${methods[@]}"; do run 30 1024 cuda $m; run 30 1024 cpu $m; done
  for m in "${methods[@]}"; do run 60 32768 cpu $m; done
  # TurboQuant (its apply step on the GPU since d7c7468): cuda against cpu at 1K and 32K.
  turbo=("--method turboquant --bits 3 --qjl --rotation hadamard" "--method turboquant --bits 4")
  for m in "${turbo[@]}"; do
    run 20 1024 cuda $m; run 20 1024 cpu $m; run 30 32768 cuda $m; run 45 32768 cpu $m
  done
  # KVQuant (its apply step on the GPU, its calibration on the host's CPU): on 512 tokens, as the
  # CPU's calibration of a whole 32K tensor takes seconds.
  kvq="--method kvquant --calib-tokens 512"
  run 20 1024 cuda $kvq; run 20 1024 cpu $kvq; run 45 32768 cuda $kvq; run 60 32768 cpu $kvq
  # Below 1K, for `--backend auto` (which takes the GPU whenever it runs every stage): whether
  # the CPU wins short runs.
  for m in "${methods[@]}"; do run 20 256 cuda $m; run 20 256 cpu $m; done
  cat "$out/runs.jsonl"
  gpu=$(echo "$device" | cut -d, -f1 | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/ .*//')
  results="$out/gpu_run_${gpu:-gpu}.json"
  [ -f "bench/results/gpu_run_${gpu}.json" ] && cp "bench/results/gpu_run_${gpu}.json" "$results"
  python3 bench/run_report.py --from-json "$out/runs.jsonl" --measured-here \
    --command 'bash bench/gpu_session.sh' --results "$results" > "$out/run_report.txt" 2>&1
  echo "run_report rc=$? -> $results" >> "$out/run_report.txt"
fi

if has store && [ "$(left)" -gt 40 ]; then
  rows_gpu=$(mktemp); rows_cpu=$(mktemp)
  limit "$(cap 60)" kvlab bench cpu --backend cuda --contexts 8192,32768 --steps 12 --json \
    > "$rows_gpu" 2>> "$out/errors.txt"
  echo "bench cpu --backend cuda rc=$?" >> "$out/errors.txt"
  limit "$(cap 90)" kvlab bench cpu --contexts 8192,32768 --steps 12 --json \
    > "$rows_cpu" 2>> "$out/errors.txt"
  echo "bench cpu rc=$?" >> "$out/errors.txt"
  python3 - "$rows_gpu" "$rows_cpu" "$out/store_decode.json" <<'EOF' || tail -n 5 "$out/errors.txt"
import json, sys
runs = {}
for name, f in (("cuda", sys.argv[1]), ("cpu", sys.argv[2])):
    try:
        runs[name] = json.load(open(f))
    except ValueError:
        print("no JSON from bench cpu", "--backend cuda" if name == "cuda" else "")
json.dump(runs, open(sys.argv[3], "w"), indent=1)
for name, j in runs.items():
    for r in j["rows"]:
        print(f'{name:<5} {r["cache"]:<24} {r["context"]:>6} {r["microseconds"]:>9.0f} us '
              f'x{r["speedup_vs_fp16_fused"]:.2f} fp16  {r["decode_attention"]}')
EOF
  rm -f "$rows_gpu" "$rows_cpu"
fi

if has sanitizer && [ "$(left)" -gt 20 ]; then
  {
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny \
      --context 300 --method kvcomp --codec huffman --backend cuda
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny \
      --context 300 --method kivi --backend cuda
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuBaselines.Fp16Fused*'
    limit "$(cap 90)" compute-sanitizer --tool racecheck kvlab compress --source synthetic:tiny \
      --context 300 --method kvcomp --codec huffman --backend cuda
    limit "$(cap 60)" compute-sanitizer --tool racecheck kvlab_kernel_tests \
      --gtest_filter='GpuBaselines.Fp16Fused*'
    # The rANS warp kernels: the encoder's two passes, the shared slot table, per-warp tiles,
    # the CUDA block's value sums.
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny \
      --context 300 --method kvcomp --codec rans --backend cuda
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuFusedAttention.*Rans*'
    limit "$(cap 60)" compute-sanitizer --tool racecheck kvlab_kernel_tests \
      --gtest_filter='GpuFusedAttention.Rans*'
    # KVQuant's quantizer: a block a value token (shared atomics), the CSR scan and ballots,
    # keys turned back before RoPE and forward after.
    for tool in memcheck racecheck; do
      limit "$(cap 60)" compute-sanitizer --tool $tool kvlab compress --source synthetic:tiny \
        --context 300 --method kvquant --outliers 0.05 --backend cuda
    done
    # The RowAttention's device copy of a store's rows (appends, growth by doubling, padded
    # query groups) and its launches.
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuRowAttention.*'
    # TurboQuant's quantizer: chunks of columns, the tables, the bad-vector flag.
    limit "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuQuantizers.TurboQuant*'
    # The Huffman kernels' groups: stages written and read across barriers, per-group scans, idle
    # groups that only keep the barriers (synccheck: no barrier in divergent code).
    for tool in memcheck racecheck synccheck; do
      limit "$(cap 60)" compute-sanitizer --tool $tool kvlab_kernel_tests \
        --gtest_filter='GpuFusedAttention.HuffmanGroups*:GpuFusedAttention.CorruptStreams*'
    done
  } > "$out/sanitizer.txt" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Hazard" "$out/sanitizer.txt" | head -n 20
fi

echo "session used $(($(date +%s) - start)) s"
