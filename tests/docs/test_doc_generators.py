#!/usr/bin/env python3
"""The report scripts' results (bench/*_report.py --results) and the document generators
(scripts/perf_doc.py, scripts/quality_doc.py) on small made-up rows: which targets a run's rows
give, what a results file keeps when it is written again, and what the generated text says."""
import contextlib
import io
import json
import pathlib
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "scripts")]

import bench_results as br  # noqa: E402
import codec_report  # noqa: E402
import doc_check  # noqa: E402
import eviction_eval  # noqa: E402
import eviction_report  # noqa: E402
import fused_attention_report  # noqa: E402
import gguf_runner_report  # noqa: E402
import gpu_kernels_report  # noqa: E402
import model_runner_report  # noqa: E402
import perf_doc  # noqa: E402
import planner_report  # noqa: E402
import quality_doc  # noqa: E402
import quality_table  # noqa: E402
import quantizer_report  # noqa: E402
import run_report  # noqa: E402

CMD = "python3 bench/x_report.py build/release"
MACHINE = {"name": "test machine", "cpu": "Test CPU", "cores": 2}


def by_id(targets):
    return {t["id"]: t for t in targets}


def values(t):
    return [m["value"] for m in t["measured"]]


class ReportTargets(unittest.TestCase):
    def test_quantizers_issue2_counts_both_directions_and_issue22_only_online_quantize(self):
        rows = {"int8/key": {"quantize": 3.0, "dequantize": 0.9},
                "kvcomp/value": {"quantize": 1.5, "dequantize": 6.0},
                "kvquant/key": {"quantize": 0.01, "dequantize": 2.0},   # calibrates in the call
                "q4_0/key": {"quantize": 2.0, "dequantize": 0.3},       # dequantize: not a target
                "turboquant/key": {"quantize": 0.7, "dequantize": 0.6}}
        t = by_id(quantizer_report.targets(7.5, rows, CMD))
        self.assertEqual(t["issue2"]["status"], "not met")
        self.assertEqual(t["issue2"]["measured"][0]["what"], "slowest, int8/key dequantize")
        self.assertEqual(values(t["issue2"]), [0.9, 7.5])
        self.assertEqual(t["issue22"]["measured"][0]["what"], "slowest, turboquant/key quantize")
        self.assertEqual(t["issue22"]["measured"][1]["value"], 1)
        self.assertEqual(t["issue22"]["measured"][1]["unit"], "of 2")
        self.assertEqual(t["issue22"]["command"], CMD)

    def test_codec_reads_only_the_engines_huffman_rows(self):
        row = lambda enc, dec, pay: {"encode": enc, "decode": dec, "payload_bits_per_code": pay,
                                     "entropy_bits_per_code": 4.0, "total_bits_per_code": pay}
        rows = {"huffman/key": row(1.3, 3.1, 4.04), "huffman/value@rel0.2": row(2.9, 5.0, 4.06),
                "zstd-1/key": row(0.1, 0.2, 5.0), "huffman-codes/key@rel0.2": row(0.1, 0.1, 9.0)}
        t = by_id(codec_report.targets(rows, CMD))
        self.assertEqual(values(t["decode"]), [[3.1, 5.0]])
        self.assertEqual(values(t["encode"]), [[1.3, 2.9]])
        self.assertEqual(t["payload"]["status"], "met")
        [over] = values(t["payload"])
        self.assertAlmostEqual(over[0], 1.0)
        self.assertAlmostEqual(over[1], 1.5)

    def test_fused_attention_takes_the_best_huffman_path_and_the_decode_step(self):
        def row(name, label, ctx, us, run_type="aggregate", agg="median", **extra):
            return {"name": name, "label": label, "context": ctx, "cpu_time": us,
                    "items_per_second": 1e6, "run_type": run_type, "aggregate_name": agg,
                    **extra}
        bench = []
        for ctx in (4096, 32768):
            for label, us in (("fp16", 100), ("bitpack4", 80), ("huffman", 400),
                              ("huffman-rel0.2", 250)):
                bench.append(row("BM_AttentionLogits/x", label, ctx, us))
                bench.append(row("BM_AttentionValues/x", label, ctx, us * 1.25))
                bench.append(row("BM_AttentionValues/x", label, ctx, 1.0, agg="mean"))
        for threads, fp16, packed in ((1, 160.0, 128.0), (2, 73.3, 64.1)):
            for label, ms in (("fp16", fp16), ("bitpack4", packed)):
                bench.append({"name": "BM_DecodeStep/x", "label": label, "real_time": ms,
                              "time_unit": "ms", "threads": threads, "run_type": "aggregate",
                              "aggregate_name": "median", "context": 8192})
        times, steps = fused_attention_report.parse(bench)
        self.assertEqual(sorted(times), [4096, 32768])
        self.assertEqual(steps[2], {"fp16": 73.3, "bitpack4": 64.1})
        t = by_id(fused_attention_report.targets(times, steps, CMD))
        self.assertEqual(t["packed-layer"]["status"], "met")
        self.assertEqual(values(t["packed-layer"]), [1.25, 1.25])
        self.assertIn("huffman-rel0.2", t["huffman-layer"]["measured"][0]["what"])
        self.assertEqual(values(t["huffman-layer"]), [0.4, 0.4])
        self.assertEqual(t["huffman-layer"]["status"], "not met")
        self.assertAlmostEqual(values(t["packed-step"])[1], 73.3 / 64.1, places=5)
        self.assertNotIn("huffman-step", t)  # no Huffman decode step in this run

    def test_eviction_gives_h2os_targets_and_every_policys(self):
        rows = {"h2o": {"seconds": 33.5, "gflops": 26.1}, "minicache": {"seconds": 58.7,
                                                                        "gflops": 17.3}}
        t = by_id(eviction_report.targets(rows, 54.1, CMD))
        self.assertEqual(t["h2o-minute"]["status"], "met")
        self.assertEqual(t["h2o-gemm"]["status"], "not met")
        self.assertAlmostEqual(values(t["h2o-gemm"])[0], 26.1 / 54.1, places=5)
        self.assertEqual(t["every-policy"]["issue"], 23)
        self.assertEqual(values(t["every-policy"]), [[33.5, 58.7], 58.7])

    def test_model_runner_share_is_gemm_time_over_runner_time(self):
        row = lambda ms, tps=0: {"cpu_time": ms, "time_unit": "ms", "items_per_second": tps}
        t = by_id(model_runner_report.targets(row(3.17, 80661), row(11.16, 22946), row(1.85),
                                              row(7.89), CMD))
        self.assertAlmostEqual(values(t["prefill"])[1], 1.85 / 3.17, places=4)
        self.assertEqual(values(t["decode"])[0], 22946)
        self.assertEqual(t["decode"]["status"], "met")

    def test_gguf_runner_keeps_prefill_and_decode_apart(self):
        t = by_id(gguf_runner_report.targets({1: (269.4, 37.9), 2: (513.2, 63.5)},
                                             {2: (222.4, 65.9)}, CMD))
        self.assertEqual(values(t["prefill"]), [269.4, 513.2, 222.4])
        self.assertEqual(values(t["decode"]), [37.9, 63.5, 65.9])
        self.assertEqual(t["decode"]["measured"][2]["what"], "llama.cpp 2 threads")
        self.assertEqual(t["decode"]["status"], "reported")

    def test_planner_rate_in_millions(self):
        [t] = planner_report.targets({"cpu_time": 68.9, "time_unit": "ms", "scenarios": 1e6,
                                      "items_per_second": 14.5e6}, CMD)
        self.assertEqual((t["status"], values(t)), ("met", [14.5]))

    def test_run_reads_bench_run_json_and_gpu_session_lines(self):
        bench_run = {"runs": [
            {"context": 32768, "method": m, "backend": "cpu", "run_s": s, "floor_s": 0.3,
             "peak_bytes": 2**30, "in_memory": False} for m, s in (("int8", 4.8), ("kivi-2", 11))]
            + [{"context": 131072, "method": "int8", "backend": "cpu", "run_s": 21.6,
                "floor_s": 3.0, "peak_bytes": 1.7 * 2**30, "in_memory": False}]}
        t = by_id(run_report.cpu_targets(run_report.rows_of(json.dumps(bench_run)), CMD))
        self.assertEqual(t["32k-10s"]["status"], "not met")
        self.assertEqual([m["what"] for m in t["32k-10s"]["measured"]], ["int8", "KIVI-2"])
        self.assertAlmostEqual(values(t["32k-5x-floor"])[0], 16.0)
        self.assertAlmostEqual(values(t["128k-24gib"])[0], 1.7)
        lines = "\n".join(json.dumps(r) for r in [
            {"ctx": 32768, "method": "int8 per-tensor", "backend": "cuda", "compress_s": 0.8},
            {"ctx": 32768, "method": "int8 per-tensor", "backend": "cpu", "compress_s": 5.0},
            {"ctx": 32768, "method": "kvcomp B=64 rel=0.05 + huffman", "backend": "cuda",
             "compress_s": 0.9},
            {"ctx": 1024, "method": "int8 per-tensor", "backend": "cuda", "compress_s": 0.2},
            {"ctx": 1024, "method": "int8 per-tensor", "backend": "cpu", "compress_s": 0.1},
            # A method outside the six: in the cuda-vs-cpu pairs, not in the 32K time target.
            {"ctx": 32768, "method": "turboquant-3 qjl hadamard", "backend": "cuda",
             "compress_s": 3.0},
            {"ctx": 32768, "method": "turboquant-3 qjl hadamard", "backend": "cpu",
             "compress_s": 30.0},
            {"failed": "131072 cuda --method q4_0"}])
        rows = run_report.rows_of(lines)
        self.assertEqual(len(rows), 7)
        self.assertEqual(rows[5]["method"], "turboquant-3-qjl-hadamard")
        t = by_id(run_report.gpu_targets(rows, CMD))
        self.assertEqual(t["32k-1s"]["status"], "not met")  # 2 of the 6 methods only
        self.assertEqual(t["32k-1s"]["measured"][0]["value"], 2)
        self.assertEqual([m["what"] for m in t["32k-1s"]["measured"][1:]],
                         ["int8", "KVComp + Huffman"])
        self.assertEqual(t["cuda-vs-cpu"]["status"], "not met")
        self.assertEqual(t["cuda-vs-cpu"]["measured"][0]["value"], 1)  # of the 6 methods
        self.assertEqual(t["cuda-vs-cpu"]["measured"][2]["what"], "least, int8 at 1K")
        self.assertIn("3 method × context pairs", t["cuda-vs-cpu"]["measured"][1]["what"])
        self.assertNotIn("128k-4s", t)


    def test_gpu_kernels_takes_each_formats_faster_path_per_context_and_batch(self):
        def row(kernel, ctx, us, batch=1, fused=None, copy=0.5):
            r = {"kernel": kernel, "context": ctx, "batch": batch, "microseconds": us,
                 "copy_fraction": copy}
            if fused:
                r["speedup_vs_fp16_fused"] = fused
            return r

        j = {"rows": [row("fp16_fused", 16384, 40.0, copy=0.85),
                      row("fp16_fused_b8", 16384, 160.0, 8, copy=0.79),
                      row("fp16_fused_b32", 16384, 900.0, 32, copy=0.5),  # shown, not held
                      row("huffman_attn", 16384, 120.0, fused=0.33),
                      row("huffman_attn_b8", 16384, 800.0, 8, fused=0.2),
                      row("q4_0_fused", 16384, 13.0, fused=3.1),
                      row("q4_0_attn", 16384, 30.0, fused=1.3),  # the slower path: not taken
                      row("q4_0_fused_b8", 16384, 50.0, 8, fused=3.2),
                      row("huffman_attn", 8192, 1.0, fused=9.0)]}  # below 16K: not a target
        t = by_id(gpu_kernels_report.targets(j, CMD))
        self.assertEqual(t["fp16-fused"]["status"], "not met")  # 79% at B=8
        self.assertEqual(values(t["huffman-vs-fused"]), [0.33, 0.2])
        self.assertIn("B=8", t["huffman-vs-fused"]["measured"][1]["what"])
        self.assertEqual(values(t["q4_0-vs-fused"]), [3.1, 3.2])
        self.assertEqual(t["q4_0-vs-fused"]["status"], "met")
        self.assertEqual(t["kivi2-vs-fused"]["status"], "not measured yet")

    def test_gpu_kernels_reads_what_bounds_each_kernel_from_ncu_csv(self):
        head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
                '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
                '"Metric Unit","Metric Value"')

        def row(i, kernel, section, metric, unit, value):
            return (f'"{i}","7","kvlab","h","{kernel}","1","7","(256, 1, 1)","(66, 8, 1)","0",'
                    f'"9.0","{section}","{metric}","{unit}","{value}"')

        huff = ("void kvlab::cuda::(anonymous namespace)::logits_kernel<true, 8, 4>"
                "(kvlab::cuda::(anonymous namespace)::KeyArgs)")
        # Template arguments holding parentheses and namespaces, as ncu demangles them.
        fp16 = ("void kvlab::cuda::(anonymous namespace)::decode_attention_kernel<kvlab::cuda::"
                "(anonymous namespace)::Fp16Row<128>, 4>(Args, int, float *)")
        fp8 = "void kvlab::cuda::fp8_values_kernel<(kvlab::Fp8Format)0>(Fp8Args)"
        text = "\n".join([
            "==PROF== Connected to process 7", "context  kernel  us",  # the program's own lines
            head,
            row(0, huff, "GPU Speed Of Light Throughput", "DRAM Throughput", "%", "5.90"),
            row(0, huff, "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "54.02"),
            row(0, huff, "Occupancy", "Achieved Occupancy", "%", "31.5"),
            row(0, huff, "Command line profiler metrics",
                "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                "ratio", "3.51"),
            row(0, huff, "Command line profiler metrics",
                "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "ratio",
                "0.40"),
            row(1, fp16, "GPU Speed Of Light Throughput", "DRAM Throughput", "%", "81.2"),
            row(1, fp16, "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "45"),
            row(1, fp16, "Launch Statistics", "Registers Per Thread", "register/thread", "128"),
            row(1, fp16, "Warp State Statistics", "Warp Cycles Per Issued Instruction", "cycle",
                "7.07"),
            row(2, fp8, "GPU Speed Of Light Throughput", "DRAM Throughput", "%", "40"),
            row(2, fp8, "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%",
                "1,000.5"),
            row(3, "no_metrics_kernel()", "Occupancy", "Achieved Occupancy", "%", "n/a"),
        ])
        kernels = gpu_kernels_report.ncu_kernels(text)
        self.assertEqual(set(kernels), {"logits_kernel<true,8,4>", "fp8_values_kernel<(Fp8Format)0>",
                                        "decode_attention_kernel<Fp16Row<128>,4>"})
        self.assertEqual(kernels["fp8_values_kernel<(Fp8Format)0>"]["Compute (SM) Throughput"], 1000.5)
        bound, shown = gpu_kernels_report.bound_of(kernels["logits_kernel<true,8,4>"])
        self.assertEqual(bound, "latency")
        self.assertIn("most stalls: long scoreboard (3.5 cycles an issue)", shown)
        fp16_bound, fp16_shown = gpu_kernels_report.bound_of(
            kernels["decode_attention_kernel<Fp16Row<128>,4>"])
        self.assertEqual(fp16_bound, "DRAM")
        self.assertIn("128 registers", fp16_shown)
        self.assertEqual(gpu_kernels_report.bound_of(kernels["fp8_values_kernel<(Fp8Format)0>"])[0],
                         "issue")
        t = gpu_kernels_report.ncu_target(kernels, CMD)
        self.assertEqual((t["id"], t["issue"], t["status"]), ("ncu-bounds", 46, "reported"))
        self.assertEqual(values(t), [81.2, 40.0, 5.9])  # by kernel name; DRAM % of peak
        self.assertTrue(t["measured"][0]["what"].startswith("decode_attention_kernel"))
        self.assertIsNone(gpu_kernels_report.ncu_target({}, CMD))

class ResultsFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = pathlib.Path(self.dir.name) / "planner_test-2c.json"

    def tearDown(self):
        self.dir.cleanup()

    def update(self, *args, **kwargs):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            data = br.update(*args, **kwargs)
        return data, err.getvalue()

    def test_names_and_ranges(self):
        self.assertEqual(br.split_name("bench/results/fused_attention_epyc-zen5-2c.json"),
                         ("fused_attention", "epyc-zen5-2c"))
        with self.assertRaises(ValueError):
            br.split_name("planner.json")
        self.assertEqual(br.number("x", [2.0, 1.0], "s")["value"], [1.0, 2.0])
        self.assertEqual(br.number("x", [1.001, 1.004], "s")["value"], 1.001)
        self.assertIsNone(br.target("t", 44, "x", "not measured yet", [], CMD)["date"])
        self.assertEqual(br.command_line(["bench/planner_report.py", "build", "--results",
                                          "a.json", "--benchmark_filter=a|b"]),
                         "python3 bench/planner_report.py build '--benchmark_filter=a|b'")

    def test_update_keeps_notes_other_targets_and_the_machines_name(self):
        first = [br.target("sweep", 21, "≥ 1M/s", "met", [br.number("", 14.5, "M/s")], CMD,
                           "2026-11-26", "what bounds it"),
                 br.target("other", 21, "another", "met", [br.number("", 1, "x")], CMD,
                           "2026-11-26")]
        self.update(self.path, "planner", first, MACHINE)
        again = [br.target("sweep", 21, "≥ 1M/s", "met", [br.number("", 15.0, "M/s")], CMD,
                           "2026-12-01")]
        data, err = self.update(self.path, "planner", again,
                                {"cpu": "Test CPU", "cores": 2, "os": "Debian 12"})
        self.assertIn("kept the note of target 'sweep'", err)
        t = by_id(data["targets"])
        self.assertEqual([x["id"] for x in data["targets"]], ["sweep", "other"])
        self.assertEqual((values(t["sweep"]), t["sweep"]["note"]), ([15.0], "what bounds it"))
        self.assertEqual(data["machine"], {"name": "test machine", "cpu": "Test CPU",
                                           "cores": 2, "os": "Debian 12"})
        self.assertEqual(json.loads(self.path.read_text()), data)

    def test_update_refuses_another_benchs_file_and_writes_nothing_without_targets(self):
        with self.assertRaises(ValueError):
            br.update(pathlib.Path(self.dir.name) / "codec_test-2c.json", "planner", [], MACHINE)
        data, err = self.update(self.path, "planner", [], MACHINE)
        self.assertIsNone(data)
        self.assertFalse(self.path.exists())

    def test_another_machine_replaces_the_description(self):
        self.update(self.path, "planner", [br.target("sweep", 21, "x", "met",
                                                     [br.number("", 1, "x")], CMD)], MACHINE)
        data, err = self.update(self.path, "planner", [br.target(
            "sweep", 21, "x", "met", [br.number("", 1, "x")], CMD)], {"cpu": "Other CPU"})
        self.assertIn("name the file after this device", err)
        self.assertEqual(data["machine"], {"name": "Other CPU", "cpu": "Other CPU"})


class PerformanceDoc(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.results = pathlib.Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, targets, raw=None, machine=MACHINE):
        bench, device = br.split_name(name)
        data = {"schema": br.SCHEMA, "bench": bench, "device": device, "machine": machine,
                "targets": targets}
        if raw:
            data["raw"] = raw
        br.write(self.results / name, data)

    def test_a_section_per_bench_a_row_per_target_and_device(self):
        self.write("planner_b-2c.json", [br.target(
            "sweep", 21, "≥ 1M scenarios/s", "met", [br.number("sweep", 14.46, "M/s", 1)],
            "taskset -c 1 x | y", "2026-11-26", "bound by arithmetic")])
        self.write("planner_a-2c.json", [br.target(
            "sweep", 21, "≥ 1M scenarios/s", "not met", [br.number("sweep", [0.5, 0.9], "M/s")],
            "x", "2026-11-20")])
        self.write("gpu_run_h200.json", [br.target(
            "32k-1s", 44, "32K in ≤ 1 s", "not measured yet", [], "kvlab bench run")],
            raw=["bench/results/raw_h200_x.json"], machine={"name": "a GPU", "gpu": "H200"})
        (self.results / "raw_h200_x.json").write_text("{}")
        text = perf_doc.render(perf_doc.load_results(self.results))
        self.assertEqual(text, perf_doc.render(perf_doc.load_results(self.results)))
        self.assertIn("## Planner sweep (issue 21)", text)
        newest = text.index("| issue 21: ≥ 1M scenarios/s (note 1) | sweep: 14.5 M/s | yes | "
                            "[b-2c](#machines) | 2026-11-26 | `taskset -c 1 x \\| y` |")
        older = text.index("| issue 21: ≥ 1M scenarios/s | sweep: 0.50–0.90 M/s | **no** | "
                           "[a-2c](#machines) | 2026-11-20 | `x` |")
        self.assertLess(newest, older)
        self.assertIn("1. bound by arithmetic", text)
        self.assertIn("| issue 44: 32K in ≤ 1 s | — | not measured yet | [h200](#machines) | — |",
                      text)
        self.assertIn("Raw output kept beside the results: `bench/results/raw_h200_x.json`.", text)
        self.assertIn("| h200 | a GPU; H200 | — | — | — |", text)
        self.assertNotIn("## Quantizer throughput", text)

    def test_bad_results_are_named(self):
        (self.results / "stray_x.json").write_text("{}")
        with self.assertRaisesRegex(perf_doc.ResultsError, "stray_x.json: no \"schema\""):
            perf_doc.load_results(self.results)
        (self.results / "stray_x.json").unlink()
        self.write("planner_x.json", [br.target("s", 21, "t", "met", [br.number("", 1, "")],
                                                "c", "2026-11-26")], raw=["bench/results/r.json"])
        with self.assertRaisesRegex(perf_doc.ResultsError, "r.json: named in a \"raw\" list"):
            perf_doc.load_results(self.results)
        self.write("planner_x.json", [br.target("s", 21, "t", "met", [], "c", "2026-11-26")])
        with self.assertRaisesRegex(perf_doc.ResultsError, "measured numbers go with"):
            perf_doc.load_results(self.results)
        self.write("planner_x.json", [br.target("s", 21, "t", "met", [br.number("", 1, "")],
                                                "c", "2026-11-26")])
        data = json.loads((self.results / "planner_x.json").read_text())
        data["device"] = "y"
        (self.results / "planner_x.json").write_text(json.dumps(data))
        with self.assertRaisesRegex(perf_doc.ResultsError, "do not make its name"):
            perf_doc.load_results(self.results)

    def test_check_names_the_first_different_line(self):
        doc = self.results / "doc.md"
        doc.write_text("a\nb\n")
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(doc_check.finish("a\nb\n", check=doc, script="s.py"), 0)
            self.assertEqual(doc_check.finish("a\nc\n", check=doc, script="s.py"), 1)
        self.assertIn(f"{doc}:2: is 'b', the results give 'c'", err.getvalue())
        self.assertEqual(len(err.getvalue().splitlines()), 1)


class QualityDoc(unittest.TestCase):
    PPL = {"kind": "ppl", "policy_id": "h2o", "budget": "50%", "before_question": False,
           "kept_fraction": 0.501, "tokens": 510, "perplexity_change": 0.0338,
           "kl_mean": 0.0269, "next_token_agreement": 0.916}
    NEEDLE = {"kind": "needle", "policy_id": "h2o", "budget": "50%", "before_question": False,
              "cells": [{"found": 1}, {"found": 0}]}

    def rows(self, *rows):
        return {eviction_eval.key(r["kind"], r["policy_id"], r["budget"], r["before_question"]): r
                for r in rows}

    def test_uncertainties_where_stored_and_a_dash_where_not(self):
        old = eviction_eval.markdown_table(self.rows(self.PPL, self.NEEDLE), "old.jsonl")
        self.assertTrue(old.startswith("The rows of `old.jsonl` were stored before runs kept "
                                       "their uncertainties (accuracy_high, accuracy_low,"))
        self.assertIn("| h2o | decode | 50% | 50.1% | 510 | +3.38% | — | 0.0269 | — | 91.6% | — "
                      "| ✓✗ 1/2, 95% — |  |", old)
        new = eviction_eval.markdown_table(self.rows(
            {**self.PPL, "perplexity_change_se": 0.0052, "kl_mean_se": 0.0031,
             "next_token_agreement_low": 0.89, "next_token_agreement_high": 0.936},
            {**self.NEEDLE, "accuracy_low": 0.095, "accuracy_high": 0.905}), "new.jsonl")
        self.assertTrue(new.startswith("| policy |"))
        self.assertIn("| +3.38% | 0.52% | 0.0269 | 0.0031 | 91.6% | 89.0–93.6% | "
                      "✓✗ 1/2, 95% 10–90% |", new)

    def test_only_the_generated_block_is_rewritten(self):
        rel = "bench/results/eviction_eval_smollm2_2026-11-29.jsonl"
        marker = f"<!-- generated by scripts/quality_doc.py from {rel}: do not edit -->\n"
        doc = f"# Title\n\nprose stays\n\n{marker}\nstale table\n\n<!-- end generated -->\nafter\n"
        out = quality_doc.render(doc)
        # Every stored row has its intervals: the table follows the marker with no caveat.
        self.assertTrue(out.startswith(f"# Title\n\nprose stays\n\n{marker}\n| policy |"))
        self.assertTrue(out.endswith("|\n\n<!-- end generated -->\nafter\n"))
        self.assertNotIn("stale table", out)
        self.assertEqual(quality_doc.render(out), out)
        with self.assertRaisesRegex(quality_doc.DocError, "no generated block"):
            quality_doc.render("# nothing generated\n")
        with self.assertRaisesRegex(quality_doc.DocError, "does not exist"):
            quality_doc.render(marker.replace(rel, "bench/results/eviction_eval_none.jsonl") +
                               "<!-- end generated -->\n")


class QualityTable(unittest.TestCase):
    """scripts/quality_table.py: the table of a quality sweep's stored runs."""
    ROW = {"method_label": "int8 per-tensor", "policy_label": "none", "kept_fraction": 1.0,
           "memory_bits_per_value": 8.0016, "tokens": 4088, "perplexity_exact": 4.31862,
           "perplexity_change": 0.0055, "perplexity_change_se": 0.0019, "kl_mean": 0.00712,
           "kl_mean_se": 0.00051, "next_token_agreement": 0.9606,
           "next_token_agreement_low": 0.9543, "next_token_agreement_high": 0.9661, "seconds": 9.4}

    def test_rows_with_their_intervals_and_within_noise_where_the_interval_holds_zero(self):
        noisy = {**self.ROW, "method_label": "kivi-4", "perplexity_change": -0.0035,
                 "seconds": 250.0}
        evicted = {**self.ROW, "method_label": "none", "policy_label": "h2o budget 50%",
                   "kept_fraction": 0.5037, "memory_bits_per_value": 8.06, "seconds": 61}
        table = quality_table.markdown_table([self.ROW, noisy, evicted], "x.jsonl", planned=3)
        lines = table.splitlines()
        self.assertTrue(lines[0].startswith("| method / policy |"))
        self.assertEqual(lines[2], "| int8 per-tensor | 8.00 | 4,088 | 4.3186 | +0.55% | 0.19% |  "
                         "| 0.0071 | 0.0005 | 96.06% | 95.4–96.6% | 9 s |")
        # |−0.35%| <= 1.96 x 0.19%: the change is within noise of the exact cache.
        self.assertIn("| kivi-4 | 8.00 | 4,088 | 4.3186 | -0.35% | 0.19% | within noise |", lines[3])
        self.assertTrue(lines[3].endswith("| 4.2 min |"))
        self.assertTrue(lines[4].startswith("| h2o budget 50% | 8.06 (kept 50.4%) |"))
        self.assertEqual(len(lines), 5)

    def test_a_sweep_not_yet_finished_says_how_many_rows_it_has(self):
        table = quality_table.markdown_table([self.ROW], "bench/results/quality_x.jsonl", planned=12)
        self.assertTrue(table.startswith("1 of the sweep's 12 rows are measured so far "
                                         "(`bench/results/quality_x.jsonl`; "
                                         "`scripts/quality_sweep.py` resumes the rest)."))


if __name__ == "__main__":
    unittest.main()
