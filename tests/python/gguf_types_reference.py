#!/usr/bin/env python3
"""Writes a GGUF file with one tensor of every ggml type kvlab dequantizes, and their reference
dequantizations, for kvlab's GGUF reader and dequantizers (ggml_quants.cpp) to be compared with.

Everything is made by the `gguf` package (PyPI, 0.19; llama.cpp's own Python writer and
dequantizers), with NumPy; nothing of kvlab is used:

  OUT_DIR/types.gguf     GGUFWriter output. One tensor per type, named as the type ("Q4_K"),
                         of ROWS x COLS values (numpy shape [4, 512]; ggml dims {512, 4}), written
                         with raw_dtype from random block bytes (seeded) in which every scale field
                         is set to a finite moderate value (fp16 d / dmin / m in +-[2^-10, 2^-3],
                         MXFP4's E8M0 exponent in [110, 140], Q8_K's float d), so that no NaN or
                         infinity appears. F32 / F16 / BF16 hold normal-distributed values.
                         Also one metadata key of every GGUF value type (see METADATA).
  OUT_DIR/<NAME>.f32     the tensor as gguf.quants.dequantize turns it into floats: ROWS*COLS
                         little-endian float32, row-major. Q8_K, which gguf-py does not
                         dequantize, is computed here as d * qs (its whole format).
  OUT_DIR/manifest.txt   "<name> <rows> <cols>" per tensor, in file order.

Usage: gguf_types_reference.py OUT_DIR [--seed N]
"""
import argparse
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

ROWS, COLS = 4, 512

# Types in ggml id order: kvlab's dequantizable types that gguf-py can dequantize (plus Q8_K).
TYPES = [
    T.F32, T.F16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K,
    T.Q6_K, T.Q8_K, T.IQ4_NL, T.IQ4_XS, T.BF16, T.TQ1_0, T.TQ2_0, T.MXFP4, T.NVFP4,
]

# Byte offsets of the fp16 scale fields in each block (ggml-common.h's block structs).
HALF_FIELDS = {
    T.Q4_0: [0],         # d
    T.Q4_1: [0, 2],      # d, m
    T.Q5_0: [0],         # d
    T.Q5_1: [0, 2],      # d, m
    T.Q8_0: [0],         # d
    T.Q2_K: [80, 82],    # after scales[16], qs[64]: d, dmin
    T.Q3_K: [108],       # after hmask[32], qs[64], scales[12]: d
    T.Q4_K: [0, 2],      # d, dmin
    T.Q5_K: [0, 2],      # d, dmin
    T.Q6_K: [208],       # after ql[128], qh[64], scales[16]: d
    T.IQ4_NL: [0],       # d
    T.IQ4_XS: [0],       # d
    T.TQ1_0: [52],       # after qs[48], qh[4]: d
    T.TQ2_0: [64],       # after qs[64]: d
}

# One key per GGUF value type, and arrays; (key, value, type, array element type).
METADATA = [
    ("test.u8", 200, V.UINT8, None),
    ("test.i8", -100, V.INT8, None),
    ("test.u16", 60000, V.UINT16, None),
    ("test.i16", -30000, V.INT16, None),
    ("test.u32", 4000000000, V.UINT32, None),
    ("test.i32", -2000000000, V.INT32, None),
    ("test.f32", 3.25, V.FLOAT32, None),
    ("test.bool", True, V.BOOL, None),
    ("test.string", "kvlab \u2713 GGUF", V.STRING, None),  # multi-byte UTF-8
    ("test.u64", 2**63 + 5, V.UINT64, None),  # does not fit in int64
    ("test.i64", -(2**62) - 7, V.INT64, None),
    ("test.f64", -0.1, V.FLOAT64, None),
    ("test.array.i32", [1, -2, 3, 2147483647], V.ARRAY, V.INT32),
    ("test.array.u8", [0, 255, 7], V.ARRAY, V.UINT8),
    ("test.array.i64", [-(2**40), 2**62], V.ARRAY, V.INT64),
    ("test.array.f32", [0.5, -1.5], V.ARRAY, V.FLOAT32),
    ("test.array.bool", [True, False, True], V.ARRAY, V.BOOL),
    ("test.array.str", ["alpha", "", "\u03b3amma"], V.ARRAY, V.STRING),
    ("test.array.empty", [], V.ARRAY, V.INT32),
]


class Writer(gguf.GGUFWriter):
    """GGUFWriter that can also write an empty array (its element type, then count 0): valid
    GGUF, which gguf-py's writer refuses and llama.cpp reads."""

    def _pack_val(self, val, vtype, add_vtype, sub_type=None):
        if vtype == V.ARRAY and len(val) == 0 and sub_type is not None:
            head = self._pack("I", vtype) if add_vtype else b""
            return head + self._pack("I", sub_type) + self._pack("Q", 0)
        return super()._pack_val(val, vtype, add_vtype, sub_type=sub_type)


def random_halves(rng, count):
    """fp16 values of either sign with magnitudes in [2^-10, 2^-3]."""
    mag = np.exp2(rng.uniform(-10, -3, count))
    sign = np.where(rng.integers(0, 2, count) == 1, -1.0, 1.0)
    return (mag * sign).astype("<f2")


def tensor_bytes(rng, qtype):
    """ROWS x COLS values of `qtype` as raw bytes, shape (ROWS, bytes per row)."""
    if qtype == T.F32:
        return rng.standard_normal((ROWS, COLS)).astype("<f4").view(np.uint8)
    if qtype == T.F16:
        return rng.standard_normal((ROWS, COLS)).astype("<f2").view(np.uint8)
    if qtype == T.BF16:
        bits = rng.standard_normal((ROWS, COLS)).astype("<f4").view("<u4")
        return (bits >> 16).astype("<u2").view(np.uint8)
    block, size = GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for offset in HALF_FIELDS.get(qtype, []):
        raw[:, offset:offset + 2] = random_halves(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if qtype == T.MXFP4:  # E8M0 shared exponent: 2^(e-127), times at most 6
        raw[:, 0] = rng.integers(110, 141, n_blocks, dtype=np.uint8)
    if qtype == T.Q8_K:  # float d, then 256 int8 quants and 16 int16 bsums
        d = (rng.uniform(2**-10, 2**-3, n_blocks) * np.where(rng.integers(0, 2, n_blocks), -1, 1))
        raw[:, 0:4] = d.astype("<f4").view(np.uint8).reshape(n_blocks, 4)
    # NVFP4's UE4M3 sub-block scales stay random: every byte decodes to a finite value (0x7F,
    # the NaN code, to 0).
    return raw.reshape(ROWS, n_blocks // ROWS * size)


def reference(data, qtype):
    if qtype == T.Q8_K:  # block_q8_K: float d, int8 qs[256], int16 bsums[16] (292 bytes)
        blocks = data.reshape(-1, 292)
        d = blocks[:, 0:4].copy().view("<f4")
        qs = blocks[:, 4:260].view(np.int8).astype(np.float32)
        return (d * qs).reshape(ROWS, COLS)
    return dequantize(data, qtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=20240611)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    writer = Writer(os.path.join(args.out_dir, "types.gguf"), "kvlab-test")
    for key, value, vtype, sub_type in METADATA:
        writer.add_key_value(key, value, vtype, sub_type=sub_type)

    manifest = []
    for qtype in TYPES:
        data = tensor_bytes(rng, qtype)
        writer.add_tensor(qtype.name, data, raw_dtype=qtype)
        values = np.asarray(reference(data, qtype), dtype=np.float32)
        if values.shape != (ROWS, COLS) or not np.all(np.isfinite(values)):
            sys.exit(f"{qtype.name}: reference has shape {values.shape} or non-finite values")
        values.astype("<f4").tofile(os.path.join(args.out_dir, f"{qtype.name}.f32"))
        manifest.append(f"{qtype.name} {ROWS} {COLS}")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with open(os.path.join(args.out_dir, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
