#!/usr/bin/env bash
# One lease's device checks for the GPU engine (issues 44 and 46), run there by
#   bash .gpu/run.sh 'bash bench/gpu_session.sh'
# after ../shared/gpu/pack.sh. In order of importance, each step cut short when the session's
# budget (BUDGET seconds, default 420) runs out, so whatever ran comes back:
#   1. the GPU tests (tests.txt);
#   2. `kvlab bench gpu --json` (bench_gpu.json): every fused kernel against the fused fp16
#      decode kernel and cuBLAS;
#   3. whole runs on --backend cuda and cpu side by side (synthetic llama3-8b, 32 layers), and
#      their report against issue 44's targets (run_report.txt, gpu_run_<gpu>.json: copy it to
#      bench/results/ and run scripts/perf_doc.py --out docs/PERFORMANCE.md);
#   4. compute-sanitizer memcheck and racecheck on small runs and the fp16 decode test
#      (sanitizer.txt).
# STEPS limits what runs (default "tests bench runs sanitizer"); NCU=1 adds an Nsight Compute
# profile of each attention kernel at 32K (ncu.csv; NCU_KERNELS names which). The steps' stderr goes to errors.txt; at most
# eight files come back from a lease, so nothing else is written there.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
budget=${BUDGET:-420}
steps=${STEPS:-tests bench runs sanitizer}
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
# timeout of at most $1 seconds and at most what the budget has left (0: skip).
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
has() { [[ " $steps " == *" $1 "* ]]; }

device=$(nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | head -n 1)
echo "$device, $(nproc) host cores"

if has tests; then
  timeout "$(cap 200)" kvlab_kernel_tests > "$out/tests.txt" 2>&1
  echo "kernel tests rc=$?" >> "$out/tests.txt"
  timeout "$(cap 60)" kvlab_backend_ops_tests >> "$out/tests.txt" 2>&1
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
    timeout "$(cap 90)" kvlab bench gpu --json --contexts "$ctx" --batches "$batches" \
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
j = dict(parts[0])
j["rows"] = [r for p in parts for r in p["rows"]]
j["encode"] = [e for p in parts for e in p.get("encode", [])]
json.dump(j, open(os.path.join(sys.argv[1], "bench_gpu.json"), "w"), indent=1)
print(j["device"], "copy", round(j["copy_gb_s"]), "GB/s")
for r in j["rows"]:
    print(f'{r["kernel"]:<16} {r["context"]:>7} {r["microseconds"]:>9.1f} us '
          f'{100 * r.get("copy_fraction", 0):>4.0f}% copy  '
          f'x{r["speedup_vs_cublas_fp16"]:.2f} cublas  x{r.get("speedup_vs_fp16_fused", 0):.2f} fused')
EOF
fi

run() {  # seconds context backend method...
  local limit ctx=$2 be=$3; limit=$(cap "$1"); shift 3
  [ "$limit" -gt 5 ] || return 0
  timeout "$limit" kvlab compress --source synthetic:llama3-8b --context "$ctx" --backend "$be" \
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
  for m in "${methods[@]}"; do run 30 1024 cuda $m; run 30 1024 cpu $m; done
  # Below 1K, for `--backend auto` (which takes the GPU whenever it runs every stage): whether
  # the CPU wins short runs.
  for m in "${methods[@]}"; do run 20 256 cuda $m; run 20 256 cpu $m; done
  for m in "${methods[@]}"; do run 60 32768 cuda $m; done
  for m in "${methods[@]}"; do run 90 131072 cuda $m; done
  for m in "${methods[@]}"; do run 60 32768 cpu $m; done
  # TurboQuant (its apply step on the GPU since d7c7468): cuda against cpu at 1K and 32K.
  turbo=("--method turboquant --bits 3 --qjl --rotation hadamard" "--method turboquant --bits 4")
  for m in "${turbo[@]}"; do
    run 20 1024 cuda $m; run 20 1024 cpu $m; run 30 32768 cuda $m; run 45 32768 cpu $m
  done
  cat "$out/runs.jsonl"
  gpu=$(echo "$device" | cut -d, -f1 | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/ .*//')
  results="$out/gpu_run_${gpu:-gpu}.json"
  [ -f "bench/results/gpu_run_${gpu}.json" ] && cp "bench/results/gpu_run_${gpu}.json" "$results"
  python3 bench/run_report.py --from-json "$out/runs.jsonl" --command 'bash bench/gpu_session.sh' \
    --results "$results" > "$out/run_report.txt" 2>&1
  echo "run_report rc=$? -> $results" >> "$out/run_report.txt"
fi

if has sanitizer && [ "$(left)" -gt 20 ]; then
  {
    timeout "$(cap 60)" compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny \
      --context 300 --method kvcomp --codec huffman --backend cuda
    timeout "$(cap 60)" compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny \
      --context 300 --method kivi --backend cuda
    timeout "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuBaselines.Fp16Fused*'
    timeout "$(cap 90)" compute-sanitizer --tool racecheck kvlab compress --source synthetic:tiny \
      --context 300 --method kvcomp --codec huffman --backend cuda
    timeout "$(cap 60)" compute-sanitizer --tool racecheck kvlab_kernel_tests \
      --gtest_filter='GpuBaselines.Fp16Fused*'
    # The rANS warp kernels: the encoder's two passes, the shared slot table, per-warp tiles,
    # the CUDA block's value sums.
    timeout "$(cap 60)" compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny \
      --context 300 --method kvcomp --codec rans --backend cuda
    timeout "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuFusedAttention.*Rans*'
    timeout "$(cap 60)" compute-sanitizer --tool racecheck kvlab_kernel_tests \
      --gtest_filter='GpuFusedAttention.Rans*'
    # TurboQuant's quantizer: chunks of columns, the tables, the bad-vector flag.
    timeout "$(cap 60)" compute-sanitizer --tool memcheck kvlab_kernel_tests \
      --gtest_filter='GpuQuantizers.TurboQuant*'
    # The Huffman kernels' groups: stages written and read across barriers, per-group scans, idle
    # groups that only keep the barriers (synccheck: no barrier in divergent code).
    for tool in memcheck racecheck synccheck; do
      timeout "$(cap 60)" compute-sanitizer --tool $tool kvlab_kernel_tests \
        --gtest_filter='GpuFusedAttention.HuffmanGroups*:GpuFusedAttention.CorruptStreams*'
    done
  } > "$out/sanitizer.txt" 2>&1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Hazard" "$out/sanitizer.txt" | head -n 20
fi

if [ "${NCU:-0}" = 1 ] && [ "$(left)" -gt 30 ]; then
  # One launch of each attention kernel at 32K (after the bench's three warm-up launches), as CSV
  # (ncu.csv) with the warps' stall reasons, for `bench/gpu_kernels_report.py --ncu` (what bounds
  # each kernel: issue 46 part 5).
  stalls=""
  for r in long_scoreboard short_scoreboard barrier membar mio_throttle lg_throttle wait \
           math_pipe_throttle tex_throttle not_selected selected no_instruction dispatch_stall \
           drain branch_resolving imc_miss sleeping; do
    stalls="$stalls${stalls:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  for k in ${NCU_KERNELS:-decode_attention_kernel logits_kernel values_kernel rans_logits_kernel \
           rans_values_kernel packed_logits_kernel packed_values_kernel fp8_logits_kernel \
           fp8_values_kernel}; do
    [ "$(left)" -gt 15 ] || break
    profile() {
      timeout "$(cap 40)" ncu --clock-control none --csv --page details --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        --section WarpStateStats "$@" -k "regex:^${k}" --launch-skip 3 -c 1 \
        kvlab bench gpu --contexts 32768 --repeats 7 --batches 1 > "$out/ncu_$k.csv" 2>&1
    }
    # Without the stall metrics where this ncu does not know one of them.
    profile --metrics "$stalls" || profile
  done
  cat "$out"/ncu_*.csv > "$out/ncu.csv" 2>/dev/null && rm -f "$out"/ncu_*.csv
  [ -f "$out/bench_gpu.json" ] &&
    python3 bench/gpu_kernels_report.py "$out/bench_gpu.json" --ncu "$out/ncu.csv" | head -n 14
fi
echo "session used $(($(date +%s) - start)) s"
