#!/usr/bin/env python3
"""Reference rANS streams for kvlab's rANS codec (engine/src/codec/rans.cpp), written from
docs/FORMAT.md ("rANS streams") alone, with no kvlab code: an encoder and a decoder in plain
Python, its own frequency normalisation (largest remainders, not kvlab's), and the frequency
table's 12-bit serialisation. With --engine-tests it then runs kvlab_engine_tests'
RansReference test on the files, which requires kvlab's encoder to write the same bytes from the
same codes and table, and kvlab's decoder to read these bytes back to the codes.

  OUT_DIR/<case>.codes    the codes, [tokens, heads, dim] uint8
  OUT_DIR/<case>.table    the serialised frequency table (386 bytes)
  OUT_DIR/<case>.payload  the payload: every block, in block order
  OUT_DIR/<case>.offsets  the blocks' byte offsets, u32 little-endian
  OUT_DIR/cases.txt       "<case> <tokens> <heads> <dim> <block_size> <pairs 0|1>" per case

Usage: rans_reference.py OUT_DIR [--engine-tests PATH] [--seed N]
"""
import argparse
import os
import struct
import sys

import numpy as np

from engine_reference import run_engine_test

LANES = 32
LOW = 1 << 16
PROB_BITS = 12
SCALE = 1 << PROB_BITS
ESCAPE = 256


def normalise(counts):
    """257 frequencies summing to 4096 (largest remainders), every counted symbol and the
    escape (weight 1) at least 1."""
    w = [float(c) for c in counts] + [1.0]
    total = sum(w)
    exact = [wi * SCALE / total for wi in w]
    f = [max(1, int(e)) if wi > 0 else 0 for wi, e in zip(w, exact)]
    order = sorted((i for i in range(257) if w[i] > 0), key=lambda i: -(exact[i] - int(exact[i])))
    k = 0
    while sum(f) < SCALE:
        f[order[k % len(order)]] += 1
        k += 1
    while sum(f) > SCALE:
        i = max((i for i in range(257) if f[i] > 1), key=lambda i: f[i])
        f[i] -= 1
    assert sum(f) == SCALE and f[ESCAPE] >= 1 and max(f) < SCALE
    return f


def serialise(freq, pairs):
    bits = 0
    for s, v in enumerate(freq):
        bits |= v << (12 * s)
    bits |= (1 if pairs else 0) << (12 * 257)
    return bits.to_bytes(386, "little")


def vector_symbols(vec, pairs):
    if not pairs:
        return [int(c) for c in vec]
    out = [int(vec[i]) | int(vec[i + 1]) << 4 for i in range(0, len(vec) - 1, 2)]
    if len(vec) % 2:
        out.append(int(vec[-1]))
    return out


def encode_block(symbols, freq, cum):
    x = [LOW] * LANES
    words = []
    n = len(symbols)
    for r in reversed(range((n + LANES - 1) // LANES)):
        base = r * LANES
        active = min(LANES, n - base)
        for lane in reversed(range(active)):  # the escapes' raw bytes, decoded last in the round
            s = symbols[base + lane]
            if freq[s] == 0:
                if x[lane] >= (LOW >> 8) << 16:
                    words.append(x[lane] & 0xFFFF)
                    x[lane] >>= 16
                x[lane] = (x[lane] << 8) | s
        for lane in reversed(range(active)):
            s = symbols[base + lane]
            sym = s if freq[s] else ESCAPE
            f = freq[sym]
            if x[lane] >= ((LOW >> PROB_BITS) << 16) * f:
                words.append(x[lane] & 0xFFFF)
                x[lane] >>= 16
            x[lane] = (x[lane] // f) * SCALE + x[lane] % f + cum[sym]
    return struct.pack("<32I", *x) + struct.pack(f"<{len(words)}H", *reversed(words))


def decode_block(block, count, freq, cum):
    x = list(struct.unpack_from("<32I", block))
    words = struct.unpack_from(f"<{(len(block) - 128) // 2}H", block, 128)
    pos = 0
    out = []
    for base in range(0, count, LANES):
        active = min(LANES, count - base)
        escapes = []
        for lane in range(active):
            slot = x[lane] & (SCALE - 1)
            sym = next(s for s in range(257) if cum[s] <= slot < cum[s] + freq[s])
            x[lane] = freq[sym] * (x[lane] >> PROB_BITS) + slot - cum[sym]
            out.append(sym)
            if sym == ESCAPE:
                escapes.append(lane)
            if x[lane] < LOW:
                x[lane] = (x[lane] << 16) | words[pos]
                pos += 1
        for lane in escapes:
            out[base + lane] = x[lane] & 0xFF
            x[lane] >>= 8
            if x[lane] < LOW:
                x[lane] = (x[lane] << 16) | words[pos]
                pos += 1
    assert pos == len(words) and all(v == LOW for v in x)
    return out


def encode(codes, block_size, freq, pairs):
    tokens, heads, dim = codes.shape
    cum = [0] * 258
    for s in range(257):
        cum[s + 1] = cum[s] + freq[s]
    payload, offsets = b"", []
    for t0 in range(0, tokens, block_size):
        for h in range(heads):
            symbols = []
            for t in range(t0, min(tokens, t0 + block_size)):
                symbols += vector_symbols(codes[t, h], pairs)
            block = encode_block(symbols, freq, cum)
            assert decode_block(block, len(symbols), freq, cum) == symbols
            offsets.append(len(payload))
            payload += block
    return payload, offsets


def worked_example():
    """The worked example of docs/FORMAT.md: codes [0 0 1 2] [0 3 0 7] [1 0 0 0], blocks of 2."""
    freq = [0] * 257
    freq[0], freq[1], freq[2], freq[3], freq[ESCAPE] = 1821, 910, 455, 455, 455
    codes = np.array([[0, 0, 1, 2], [0, 3, 0, 7], [1, 0, 0, 0]], dtype=np.uint8).reshape(3, 1, 4)
    return encode(codes, 2, freq, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--engine-tests", help="kvlab_engine_tests to run on the files")
    ap.add_argument("--seed", type=int, default=47)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    payload, offsets = worked_example()
    print("rans_reference: worked example payload", payload.hex(" "), "offsets", offsets)

    lines = []
    # (tokens, heads, dim, block, distribution, pairs)
    for i, (t, h, d, b, dist, pairs) in enumerate([
        (3, 1, 4, 2, "gauss", False),
        (70, 3, 64, 16, "gauss", False),
        (33, 2, 7, 8, "narrow", True),
        (64, 3, 64, 64, "narrow", True),
        (5, 2, 128, 4, "wide", False),
        (1, 1, 1, 1, "gauss", False),
        (40, 1, 33, 9, "narrow", True),
    ]):
        n = t * h * d
        if dist == "gauss":
            codes = np.clip(np.round(10 + 1.4 * rng.standard_normal(n)), 0, 20).astype(np.uint8)
        elif dist == "narrow":
            codes = rng.choice(6, size=n, p=[0.025, 0.14, 0.335, 0.335, 0.14, 0.025]).astype(np.uint8)
        else:
            codes = rng.integers(0, 256, size=n).astype(np.uint8)
        codes = codes.reshape(t, h, d)
        # The table from the first half of the tokens, so the rest may need the escape.
        prefix = codes[: max(1, t // 2)]
        if pairs:
            counts = [0] * 256
            for vec in prefix.reshape(-1, d):
                for s in vector_symbols(vec, True):
                    counts[s] += 1
        else:
            counts = np.bincount(prefix.reshape(-1), minlength=256).tolist()
        if dist == "wide":  # a few values missing from the table: escapes
            counts[7] = counts[200] = 0
        freq = normalise(counts)
        payload, offsets = encode(codes, b, freq, pairs)
        name = f"case{i}"
        codes.tofile(os.path.join(args.out_dir, name + ".codes"))
        with open(os.path.join(args.out_dir, name + ".table"), "wb") as f:
            f.write(serialise(freq, pairs))
        with open(os.path.join(args.out_dir, name + ".payload"), "wb") as f:
            f.write(payload)
        with open(os.path.join(args.out_dir, name + ".offsets"), "wb") as f:
            f.write(struct.pack(f"<{len(offsets)}I", *offsets))
        lines.append(f"{name} {t} {h} {d} {b} {int(pairs)}")
    with open(os.path.join(args.out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"rans_reference: {len(lines)} cases written to {args.out_dir}")
    if not args.engine_tests:
        return 0
    return run_engine_test(args.engine_tests, "RansReference.*", "KVLAB_RANS_REFERENCE_DIR",
                           args.out_dir,
                           "rans_reference")


if __name__ == "__main__":
    sys.exit(main())
