"""kvlab's ggml quantizers (ggml_quantize) against independent peers, byte for byte.

Peers:
  1. gguf-py's `gguf.quants.quantize` (llama.cpp's NumPy re-implementation of the reference
     quantizers) for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1. gguf-py has no IQ4_NL quantizer.
  2. libggml itself through ctypes, from the llama-cpp-python environment that
     scripts/test_data.sh makes (KVLAB_TEST_CACHE/llamacpp-venv), when it is there:
     quantize_row_<type>_ref of libggml-base for all six types (what llama.cpp's KV cache holds:
     ggml-cpu's set_rows calls them through quantize_row_<type>), quantize_iq4_nl (the model-file
     rule, 15-scale search) and libggml-cpu's quantize_row_iq4_nl (the KV cache's own entry).
     libggml-cpu's SIMD quantize_row_q8_0 is compared for information only (it rounds differently
     from the reference; the count of differing blocks is printed).
     Inputs with NaN and ±inf are compared with libggml only (gguf-py's NumPy max and argmax treat
     NaN differently from the C loops).

The script writes the inputs (little-endian float32) and the peers' bytes into --out with a
manifest, then runs the engine test program's GgmlKvQuantReference tests on them, which quantize
the same inputs with kvlab and assert equal bytes. Exit 0 when they pass; the IQ4_NL and libggml
comparisons are skipped, saying so, when the llama.cpp environment is missing (an error with
KVLAB_REQUIRE_TEST_DATA=1).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

BLOCK = 32
GGUF_TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
ALL_TYPES = GGUF_TYPES + ["IQ4_NL"]
TYPE_SIZE = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q5_1": 24, "IQ4_NL": 18}


def finite_inputs(rng: np.random.Generator) -> np.ndarray:
    """Blocks of the kinds that exercise the rounding: normal, outliers, zeros, tiny, ties."""
    parts = []
    parts.append(rng.standard_normal((512, BLOCK)))  # normal
    parts.append(rng.standard_normal((64, BLOCK)) * 1e3)  # large
    out = rng.standard_normal((256, BLOCK))  # outliers: one to three channels 20-200x
    for row in out:
        idx = rng.choice(BLOCK, size=rng.integers(1, 4), replace=False)
        row[idx] *= rng.uniform(20, 200, size=idx.size) * rng.choice([-1, 1], size=idx.size)
    parts.append(out)
    parts.append(np.zeros((8, BLOCK)))  # all-zero blocks
    z = rng.standard_normal((8, BLOCK))  # mostly zeros, one value
    z[:, 1:] = 0
    parts.append(z)
    for scale in (1e-20, 1e-16, 1e-15, 3e-15, 1e-12, 1e-8, 1e-5):  # tiny (fp16 subnormal scales)
        parts.append(rng.standard_normal((8, BLOCK)) * scale)
    # Ties: scales of 1 make x/d land on .5 exactly.
    t = rng.integers(-127, 128, size=(32, BLOCK)).astype(np.float64) + rng.choice([0, 0.5], size=(32, BLOCK))
    t[:, 0] = 127  # Q8_0: d = 1
    parts.append(t)
    t = rng.integers(-8, 8, size=(32, BLOCK)).astype(np.float64) + rng.choice([0, 0.5], size=(32, BLOCK))
    t[:, 0] = -8  # Q4_0: d = 1
    parts.append(t)
    t = rng.integers(0, 16, size=(32, BLOCK)).astype(np.float64) + rng.choice([0, 0.5], size=(32, BLOCK))
    t[:, 0], t[:, 1] = 0, 15  # Q4_1: d = 1, m = 0
    parts.append(t)
    t = rng.integers(-16, 16, size=(32, BLOCK)).astype(np.float64) + rng.choice([0, 0.5], size=(32, BLOCK))
    t[:, 0] = -16  # Q5_0: d = 1
    parts.append(t)
    t = rng.integers(0, 32, size=(32, BLOCK)).astype(np.float64) + rng.choice([0, 0.5], size=(32, BLOCK))
    t[:, 0], t[:, 1] = 0, 31  # Q5_1: d = 1
    parts.append(t)
    c = np.full((4, BLOCK), 0.75)  # constant blocks (max == min)
    c[1] = -3.0
    parts.append(c)
    # Values already in fp16, as K/V activations often are.
    parts.append(rng.standard_normal((128, BLOCK)).astype(np.float16))
    return np.concatenate([p.astype(np.float32) for p in parts]).reshape(-1)


def special_inputs(rng: np.random.Generator) -> np.ndarray:
    """NaN and ±inf at various places in otherwise normal blocks."""
    x = rng.standard_normal((48, BLOCK)).astype(np.float32)
    for i, row in enumerate(x):
        kind = i % 6
        pos = rng.integers(0, BLOCK)
        if kind == 0:
            row[pos] = np.nan
        elif kind == 1:
            row[pos] = np.inf
        elif kind == 2:
            row[pos] = -np.inf
        elif kind == 3:
            row[:] = np.nan
        elif kind == 4:
            row[0] = np.nan  # NaN first: ggml's MAX() order matters
        else:
            row[pos] = np.inf
            row[(pos + 7) % BLOCK] = np.nan
    return x.reshape(-1)


def find_libggml(venv: Path) -> Path | None:
    hits = sorted(glob.glob(str(venv / "lib" / "python*" / "site-packages" / "llama_cpp" / "lib")))
    for h in hits:
        if (Path(h) / "libggml-base.so").exists():
            return Path(h)
    return None


class LibGgml:
    def __init__(self, libdir: Path):
        self.base = ctypes.CDLL(str(libdir / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        self.cpu = ctypes.CDLL(str(libdir / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
        fp = ctypes.POINTER(ctypes.c_float)
        for name in ALL_TYPES:
            f = getattr(self.base, f"quantize_row_{name.lower()}_ref")
            f.argtypes, f.restype = [fp, ctypes.c_void_p, ctypes.c_int64], None
            g = getattr(self.cpu, f"quantize_row_{name.lower()}")
            g.argtypes, g.restype = [fp, ctypes.c_void_p, ctypes.c_int64], None
        self.base.quantize_iq4_nl.argtypes = [fp, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, fp]
        self.base.quantize_iq4_nl.restype = ctypes.c_size_t

    def _call(self, fn, x: np.ndarray, name: str, *extra) -> bytes:
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.zeros(x.size // BLOCK * TYPE_SIZE[name], dtype=np.uint8)
        fn(x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.ctypes.data, *extra)
        return out.tobytes()

    def row_ref(self, name: str, x: np.ndarray) -> bytes:
        return self._call(getattr(self.base, f"quantize_row_{name.lower()}_ref"), x, name, x.size)

    def row_cpu(self, name: str, x: np.ndarray) -> bytes:
        return self._call(getattr(self.cpu, f"quantize_row_{name.lower()}"), x, name, x.size)

    def iq4_nl_chunk(self, x: np.ndarray) -> bytes:
        return self._call(self.base.quantize_iq4_nl, x, "IQ4_NL", 1, x.size, None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--engine-tests", required=True, type=Path)
    ap.add_argument("--llamacpp-venv", required=True, type=Path)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.bin"):
        old.unlink()

    rng = np.random.default_rng(20260522)
    x = finite_inputs(rng)
    s = special_inputs(rng)
    (out / "finite.f32").write_bytes(x.astype("<f4").tobytes())
    (out / "special.f32").write_bytes(s.astype("<f4").tobytes())
    manifest = []  # input type rule expected label must_match

    for name in GGUF_TYPES:
        data = quantize(x.reshape(-1, BLOCK), getattr(T, name)).tobytes()
        (out / f"gguf_{name}.bin").write_bytes(data)
        manifest.append(f"finite.f32 {name} kv gguf_{name}.bin gguf-py 1")

    libdir = find_libggml(args.llamacpp_venv)
    if libdir is None:
        msg = (f"kvlab: llama.cpp's library is missing (no llama_cpp/lib/libggml-base.so under "
               f"{args.llamacpp_venv}; run scripts/test_data.sh): IQ4_NL and the libggml "
               f"comparisons are skipped, Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 are checked against gguf-py only")
        print(msg)
        if os.environ.get("KVLAB_REQUIRE_TEST_DATA", "0") == "1":
            return 1
    else:
        lib = LibGgml(libdir)
        print(f"libggml from {libdir}")
        for name in ALL_TYPES:
            for tag, inp in (("finite", x), ("special", s)):
                f = f"ggml_ref_{name}_{tag}.bin"
                (out / f).write_bytes(lib.row_ref(name, inp))
                manifest.append(f"{tag}.f32 {name} kv {f} libggml:quantize_row_{name.lower()}_ref 1")
        for tag, inp in (("finite", x), ("special", s)):
            f = f"ggml_chunk_IQ4_NL_{tag}.bin"
            (out / f).write_bytes(lib.iq4_nl_chunk(inp))
            manifest.append(f"{tag}.f32 IQ4_NL file {f} libggml:quantize_iq4_nl 1")
            f = f"ggml_cpu_IQ4_NL_{tag}.bin"
            (out / f).write_bytes(lib.row_cpu("IQ4_NL", inp))
            manifest.append(f"{tag}.f32 IQ4_NL kv {f} libggml-cpu:quantize_row_iq4_nl 1")
        for name in GGUF_TYPES:
            f = f"ggml_cpu_{name}_finite.bin"
            (out / f).write_bytes(lib.row_cpu(name, x))
            must = 0 if name == "Q8_0" else 1  # the x86 SIMD Q8_0 rounds its own way
            manifest.append(f"finite.f32 {name} kv {f} libggml-cpu:quantize_row_{name.lower()} {must}")

    (out / "manifest.txt").write_text("\n".join(manifest) + "\n")
    print(f"{x.size // BLOCK} finite blocks, {s.size // BLOCK} NaN/inf blocks, {len(manifest)} comparisons")
    env = dict(os.environ, KVLAB_GGML_KV_REF_DIR=str(out))
    r = subprocess.run([str(args.engine_tests), "--gtest_filter=GgmlKvQuantReference.*"], env=env)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
