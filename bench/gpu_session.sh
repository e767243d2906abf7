#!/usr/bin/env bash
# One lease's device checks for the GPU engine (issue 44), run there by
#   bash .gpu/run.sh 'bash bench/gpu_session.sh'
# after ../shared/gpu/pack.sh: the GPU tests, whole runs on --backend cpu and cuda side by side
# (synthetic llama3-8b, 32 layers, source in memory), and compute-sanitizer on a small run.
# Writes tests.txt, runs.jsonl, sanitizer.txt under $OUT (or ./gpu-out), and the runs' numbers
# against issue 44's targets as gpu_run_<gpu>.json (bench/results' file for this GPU, updated):
# copy it to bench/results/ and run scripts/perf_doc.py --out docs/PERFORMANCE.md.
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
nproc >> "$out/device.txt"
timeout 240 kvlab_kernel_tests --gtest_filter='GpuQuantizers.*:GpuRun.*:GpuCodec*:GpuFused*' \
  > "$out/tests.txt" 2>&1
echo "kernel tests rc=$?" >> "$out/tests.txt"
tail -n 30 "$out/tests.txt"
run() {  # context backend method...
  local ctx=$1 be=$2; shift 2
  timeout 120 kvlab compress --source synthetic:llama3-8b --context "$ctx" --backend "$be" "$@" \
    --json 2>/dev/null | python3 -c '
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
for m in "--method int8" "--method kivi --bits 2" "--method fp8-e4m3" "--method q4_0" \
         "--method nvfp4" "--method kvcomp --codec huffman"; do
  run 32768 cuda $m
  run 32768 cpu $m
done
for m in "--method int8" "--method kvcomp --codec huffman" "--method kivi --bits 2"; do
  run 131072 cuda $m
done
run 1024 cuda --method int8
run 1024 cpu --method int8
cat "$out/runs.jsonl"
gpu=$(head -n 1 "$out/device.txt" | cut -d, -f1 | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/ .*//')
results="$out/gpu_run_${gpu:-gpu}.json"
[ -f "bench/results/gpu_run_${gpu}.json" ] && cp "bench/results/gpu_run_${gpu}.json" "$results"
python3 bench/run_report.py --from-json "$out/runs.jsonl" --command 'bash bench/gpu_session.sh' \
  --results "$results" > "$out/run_report.txt" 2>&1
echo "run_report rc=$? -> $results" >> "$out/run_report.txt"
{
  timeout 60 compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny --context 300 \
    --method kvcomp --codec huffman --backend cuda
  timeout 60 compute-sanitizer --tool memcheck kvlab compress --source synthetic:tiny --context 300 \
    --method kivi --backend cuda
  timeout 90 compute-sanitizer --tool racecheck kvlab compress --source synthetic:tiny \
    --context 300 --method kvcomp --codec huffman --backend cuda
} > "$out/sanitizer.txt" 2>&1
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/sanitizer.txt"
