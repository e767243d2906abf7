#!/usr/bin/env python3
"""Runs kvlab_bench_codecs once and prints the code stream coding table for docs/PERFORMANCE.md:
per codec and tensor, encode and decode GB/s of decoded codes, compressed bits per code (payload,
and total with offsets, bit counts and codebooks), payload over the stream's order-0 entropy,
and decode speed relative to zstd level 1 on the same tensor, all from the same run. With
--results FILE it also writes today's numbers of issue 3's codec targets there
(bench/bench_results.py).

usage: bench/codec_report.py BUILD_DIR [--results FILE] [extra benchmark args]"""
import bench_results as br


def rate(gbs):
    """GB/s with two decimals, or three significant digits below 0.1 (zstd -19 encodes slowly)."""
    return f"{gbs:.2f}" if gbs >= 0.1 else f"{gbs:.3g}"


def parse(results):
    """{label: {"encode": GB/s, "decode": GB/s, "payload_bits_per_code": ..., ...}}"""
    rows = {}
    for r in results:
        if "label" not in r or r.get("error_occurred"):
            continue
        direction = "encode" if ("Encode" in r["name"] or "Compress" in r["name"]) else "decode"
        if "Decompress" in r["name"]:
            direction = "decode"
        row = rows.setdefault(r["label"], {})
        row[direction] = r["bytes_per_second"] / 1e9
        for key in ("payload_bits_per_code", "total_bits_per_code", "entropy_bits_per_code"):
            row[key] = r[key]
    return rows


def targets(rows, command):
    """Issue 3's codec targets over the engine's Huffman rows (`huffman/<stream>`), and issue 46's
    rANS rows against them."""
    huff = {label: d for label, d in rows.items() if label.startswith("huffman/")}
    if not huff:
        return []
    streams = f"{len(huff)} stream{'s' * (len(huff) > 1)}"
    out = []
    decode = [d["decode"] for d in huff.values() if "decode" in d]
    if decode:
        out.append(br.target("decode", 3, "Huffman decode ≥ 1.5 GB/s of decoded codes per core",
                             br.met(min(decode) >= 1.5),
                             [br.number(streams, decode, "GB/s")], command))
    encode = [d["encode"] for d in huff.values() if "encode" in d]
    if encode:
        out.append(br.target("encode", 3, "Huffman encode ≥ 0.5 GB/s per core",
                             br.met(min(encode) >= 0.5),
                             [br.number(streams, encode, "GB/s")], command))
    over = [100 * (d["payload_bits_per_code"] / d["entropy_bits_per_code"] - 1)
            for d in huff.values()]
    entropy = [d["entropy_bits_per_code"] for d in huff.values()]
    out.append(br.target(
        "payload", 3, "Huffman payload within 3% of the stream's order-0 entropy",
        br.met(max(over) <= 3.0),
        [br.number(f"over the entropy, {streams} of {br.span(entropy, 1)} bits per code",
                   over, "%", 1)],
        command))
    # Issue 46 part 3 on the CPU: rANS beside Huffman on the same streams (same symbols, same
    # book's histogram), both measured in this run.
    pairs = [(d, huff[f"huffman/{label.split('/', 1)[1]}"]) for label, d in rows.items()
             if label.startswith("rans/") and f"huffman/{label.split('/', 1)[1]}" in huff]
    if pairs and all("decode" in r and "decode" in h for r, h in pairs):
        out.append(br.target(
            "rans", 46, "rANS beside Huffman on the same streams (CPU, one core): decode rate and "
            "total size (payload, metadata, tables) against Huffman's", "reported",
            [br.number(f"decode, {len(pairs)} streams", [r["decode"] / h["decode"] for r, h in pairs],
                       "× Huffman"),
             br.number("total size", [r["total_bits_per_code"] / h["total_bits_per_code"]
                                      for r, h in pairs], "× Huffman", 3)],
            command))
    return out


def main():
    args, extra = br.parse_args(__doc__)
    rows = parse(br.run_benchmark(args.build, "kvlab_bench_codecs", "--benchmark_min_time=0.2",
                                  *extra))
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
    br.write_results(args, "codec", targets(rows, br.command_line()))


if __name__ == "__main__":
    main()
