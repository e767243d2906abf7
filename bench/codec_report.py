#!/usr/bin/env python3
"""Runs kvlab_bench_codecs once and prints the code stream coding table for docs/PERFORMANCE.md:
per codec and tensor, encode and decode GB/s of decoded codes, compressed bits per code (payload,
and total with offsets, bit counts and codebooks), payload over the stream's order-0 entropy,
and decode speed relative to zstd level 1 on the same tensor, all from the same run.

usage: bench/codec_report.py BUILD_DIR [extra benchmark args]"""
import json
import subprocess
import sys


def rate(gbs):
    """GB/s with two decimals, or three significant digits below 0.1 (zstd -19 encodes slowly)."""
    return f"{gbs:.2f}" if gbs >= 0.1 else f"{gbs:.3g}"


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    exe = f"{build}/bench/kvlab_bench_codecs"
    out = subprocess.run([exe, "--benchmark_format=json", "--benchmark_min_time=0.2", *sys.argv[2:]],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for r in json.loads(out)["benchmarks"]:
        if "label" not in r or r.get("error_occurred"):
            continue
        direction = "encode" if ("Encode" in r["name"] or "Compress" in r["name"]) else "decode"
        if "Decompress" in r["name"]:
            direction = "decode"
        row = rows.setdefault(r["label"], {})
        row[direction] = r["bytes_per_second"] / 1e9
        for key in ("payload_bits_per_code", "total_bits_per_code", "entropy_bits_per_code"):
            row[key] = r[key]
    print("| codec / tensor | encode GB/s | decode GB/s | payload bits/code | total bits/code "
          "| payload / entropy | decode vs zstd-1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, d in rows.items():
        tensor = label.split("/")[-1]
        zstd1 = rows.get(f"zstd-1/{tensor}", {}).get("decode")
        rel = f"{d.get('decode', 0) / zstd1:.2f}x" if zstd1 else "n/a"
        print(f"| {label} | {rate(d.get('encode', 0))} | {rate(d.get('decode', 0))} "
              f"| {d['payload_bits_per_code']:.3f} | {d['total_bits_per_code']:.3f} "
              f"| {d['payload_bits_per_code'] / d['entropy_bits_per_code']:.3f} | {rel} |")
    entropies = {label.split("/")[-1]: d["entropy_bits_per_code"] for label, d in rows.items()}
    print("\norder-0 entropy (bits/code): " +
          ", ".join(f"{t} {e:.3f}" for t, e in entropies.items()))


if __name__ == "__main__":
    main()
