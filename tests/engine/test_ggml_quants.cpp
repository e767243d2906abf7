// ggml block types: each type's blocks are built here from chosen quants and scales, packed the
// way llama.cpp's quantizers pack them (quantize_row_*_ref in ggml-quants.c, the struct layouts
// of ggml-common.h), and the decoded values are checked against the block format's formula
// evaluated in double. The packing here and the unpacking in ggml_quants.cpp are written from
// opposite ends of the reference, so a misread bit position shows up as a wrong value.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvlab/engine/model/ggml_types.h"

namespace kvlab {
namespace {

using Rng = std::mt19937;

int uniform(Rng& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Value of an fp16 bit pattern from its fields (independent of the engine's converter).
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// A random normal fp16 of either sign with a magnitude in [2^(lo-15), 2^(hi-14)).
std::uint16_t random_half(Rng& rng, int lo = 8, int hi = 18) {
  return static_cast<std::uint16_t>((uniform(rng, 0, 1) << 15) | (uniform(rng, lo, hi) << 10) |
                                    uniform(rng, 0, 1023));
}

double bf16_value(std::uint16_t b) {
  const int e = (b >> 7) & 0xff, m = b & 0x7f;
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, -133);
  return sign * std::ldexp(128 + m, e - 134);
}

// Little-endian stores, byte by byte.
void put16(std::vector<std::uint8_t>& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v & 0xff);
  b[at + 1] = static_cast<std::uint8_t>(v >> 8);
}
void put32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// A row of blocks and what each of its values must decode to.
struct Built {
  GgmlType type;
  std::vector<std::uint8_t> bytes;
  std::vector<double> want;
  std::vector<double> mag;  // sum of the magnitudes of the terms of each value (rounding scale)

  void value(double v, double magnitude) {
    want.push_back(v);
    mag.push_back(magnitude);
  }
  void value(double v) { value(v, std::abs(v)); }
};

// The 16 levels of IQ4_NL / IQ4_XS (kvalues_iq4nl in ggml-common.h).
constexpr double kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};
// FP4 E2M1: sign bit 3, then the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (OCP MX spec).
double e2m1(int code) {
  constexpr double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8) ? -kMag[code & 7] : kMag[code & 7];
}
// NVFP4's unsigned E4M3 scale: 4 exponent bits (bias 7), 3 mantissa bits, subnormal at 0;
// 0x7F (NaN) reads as 0 in ggml.
double ue4m3(int x) {
  if (x == 0x7F) return 0;
  const int e = (x >> 3) & 0xF, m = x & 7;
  return e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
}

// ----------------------------------------------------------------------------- 32-value blocks

Built build_q4_0(Rng& rng, int blocks) {
  Built c{GgmlType::Q4_0, std::vector<std::uint8_t>(18 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 18 * i;
    const std::uint16_t h = random_half(rng);
    put16(c.bytes, at, h);
    int q[32];
    for (int& v : q) v = uniform(rng, 0, 15);
    for (int j = 0; j < 16; ++j)
      c.bytes[at + 2 + j] = static_cast<std::uint8_t>(q[j] | q[j + 16] << 4);
    for (int v = 0; v < 32; ++v) c.value((q[v] - 8) * half_value(h));
  }
  return c;
}

Built build_q4_1(Rng& rng, int blocks) {
  Built c{GgmlType::Q4_1, std::vector<std::uint8_t>(20 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 20 * i;
    const std::uint16_t hd = random_half(rng), hm = random_half(rng);
    put16(c.bytes, at, hd);
    put16(c.bytes, at + 2, hm);
    int q[32];
    for (int& v : q) v = uniform(rng, 0, 15);
    for (int j = 0; j < 16; ++j)
      c.bytes[at + 4 + j] = static_cast<std::uint8_t>(q[j] | q[j + 16] << 4);
    for (int v = 0; v < 32; ++v) {
      const double a = q[v] * half_value(hd), m = half_value(hm);
      c.value(a + m, std::abs(a) + std::abs(m));
    }
  }
  return c;
}

// Q5_0 / Q5_1: nibbles as Q4, the fifth bit of value v in bit v of the 32-bit qh.
void pack_q5(Built& c, std::size_t qh_at, const int* q) {
  std::uint32_t qh = 0;
  for (int v = 0; v < 32; ++v) qh |= static_cast<std::uint32_t>(q[v] >> 4) << v;
  put32(c.bytes, qh_at, qh);
  for (int j = 0; j < 16; ++j) {
    c.bytes[qh_at + 4 + j] = static_cast<std::uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
  }
}

Built build_q5_0(Rng& rng, int blocks) {
  Built c{GgmlType::Q5_0, std::vector<std::uint8_t>(22 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 22 * i;
    const std::uint16_t h = random_half(rng);
    put16(c.bytes, at, h);
    int q[32];
    for (int& v : q) v = uniform(rng, 0, 31);
    pack_q5(c, at + 2, q);
    for (int v = 0; v < 32; ++v) c.value((q[v] - 16) * half_value(h));
  }
  return c;
}

Built build_q5_1(Rng& rng, int blocks) {
  Built c{GgmlType::Q5_1, std::vector<std::uint8_t>(24 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 24 * i;
    const std::uint16_t hd = random_half(rng), hm = random_half(rng);
    put16(c.bytes, at, hd);
    put16(c.bytes, at + 2, hm);
    int q[32];
    for (int& v : q) v = uniform(rng, 0, 31);
    pack_q5(c, at + 4, q);
    for (int v = 0; v < 32; ++v) {
      const double a = q[v] * half_value(hd), m = half_value(hm);
      c.value(a + m, std::abs(a) + std::abs(m));
    }
  }
  return c;
}

Built build_q8_0(Rng& rng, int blocks) {
  Built c{GgmlType::Q8_0, std::vector<std::uint8_t>(34 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 34 * i;
    const std::uint16_t h = random_half(rng);
    put16(c.bytes, at, h);
    for (int v = 0; v < 32; ++v) {
      const int q = uniform(rng, -128, 127);
      c.bytes[at + 2 + v] = static_cast<std::uint8_t>(q);
      c.value(q * half_value(h));
    }
  }
  return c;
}

Built build_iq4_nl(Rng& rng, int blocks) {
  Built c{GgmlType::IQ4_NL, std::vector<std::uint8_t>(18 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 18 * i;
    const std::uint16_t h = random_half(rng);
    put16(c.bytes, at, h);
    int q[32];
    for (int& v : q) v = uniform(rng, 0, 15);
    for (int j = 0; j < 16; ++j)
      c.bytes[at + 2 + j] = static_cast<std::uint8_t>(q[j] | q[j + 16] << 4);
    for (int v = 0; v < 32; ++v) c.value(kIq4nl[q[v]] * half_value(h));
  }
  return c;
}

// The first two blocks use the subnormal scale exponents 0 and 1.
Built build_mxfp4(Rng& rng, int blocks) {
  Built c{GgmlType::MXFP4, std::vector<std::uint8_t>(17 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 17 * i;
    const int e = i < 2 ? i : uniform(rng, 100, 150);
    c.bytes[at] = static_cast<std::uint8_t>(e);
    int q[32];
    for (int& v : q) v = uniform(rng, 0, 15);
    for (int j = 0; j < 16; ++j)
      c.bytes[at + 1 + j] = static_cast<std::uint8_t>(q[j] | q[j + 16] << 4);
    for (int v = 0; v < 32; ++v) c.value(e2m1(q[v]) * std::ldexp(1.0, e - 127));
  }
  return c;
}

// ----------------------------------------------------------------------------- K-quants

// The 2-bit planes of Q2_K and Q3_K: in each 128-value half, value 32*k + l is bits 2k..2k+1
// of byte l of the half's 32 bytes (quantize_row_q2_K_ref).
void pack_2bit_planes(Built& c, std::size_t at, const int* low) {
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int* v = low + 128 * half + l;
      c.bytes[at + 32 * half + l] =
          static_cast<std::uint8_t>(v[0] | v[32] << 2 | v[64] << 4 | v[96] << 6);
    }
  }
}

Built build_q2_k(Rng& rng, int blocks) {
  Built c{GgmlType::Q2_K, std::vector<std::uint8_t>(84 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 84 * i;
    int sc[16], mn[16], q[256];
    for (int j = 0; j < 16; ++j) {
      sc[j] = uniform(rng, 0, 15);
      mn[j] = uniform(rng, 0, 15);
      c.bytes[at + j] = static_cast<std::uint8_t>(sc[j] | mn[j] << 4);
    }
    for (int& v : q) v = uniform(rng, 0, 3);
    pack_2bit_planes(c, at + 16, q);
    const std::uint16_t hd = random_half(rng), hm = random_half(rng);
    put16(c.bytes, at + 80, hd);
    put16(c.bytes, at + 82, hm);
    for (int v = 0; v < 256; ++v) {
      const double a = half_value(hd) * sc[v / 16] * q[v], m = half_value(hm) * mn[v / 16];
      c.value(a - m, std::abs(a) + std::abs(m));
    }
  }
  return c;
}

Built build_q3_k(Rng& rng, int blocks) {
  Built c{GgmlType::Q3_K, std::vector<std::uint8_t>(110 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 110 * i;
    int q[256], low[256], s[16];
    for (int& v : q) v = uniform(rng, 0, 7);  // the 3-bit code; the value is code - 4
    // hmask: value v's high bit is bit v / 32 of byte v % 32.
    for (int v = 0; v < 256; ++v) {
      if (q[v] > 3) c.bytes[at + v % 32] |= static_cast<std::uint8_t>(1 << (v / 32));
      low[v] = q[v] & 3;
    }
    pack_2bit_planes(c, at + 32, low);
    // 16 six-bit scales (stored + 32): low nibbles in bytes 0-7 (scales 8-15 in the high
    // halves), high 2 bits of scale j at bit 2*(j/4) of byte 8 + j%4.
    const std::size_t sat = at + 96;
    for (int j = 0; j < 16; ++j) {
      s[j] = uniform(rng, 0, 63);
      if (j < 8) {
        c.bytes[sat + j] |= static_cast<std::uint8_t>(s[j] & 0xF);
      } else {
        c.bytes[sat + j - 8] |= static_cast<std::uint8_t>((s[j] & 0xF) << 4);
      }
      c.bytes[sat + 8 + j % 4] |= static_cast<std::uint8_t>((s[j] >> 4) << (2 * (j / 4)));
    }
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at + 108, hd);
    for (int v = 0; v < 256; ++v) c.value(half_value(hd) * (s[v / 16] - 32) * (q[v] - 4));
  }
  return c;
}

// Q4_K / Q5_K scales and mins, 6 bits each, in 12 bytes (quantize_row_q4_K_ref): j < 4 in the
// low 6 bits of bytes j (scale) and j + 4 (min); j >= 4: low nibbles in byte j + 4 (scale low,
// min high), top 2 bits in bits 6-7 of bytes j - 4 (scale) and j (min).
void pack_scale_min_k4(Built& c, std::size_t at, const int* sc, const int* mn) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      c.bytes[at + j] = static_cast<std::uint8_t>(sc[j]);
      c.bytes[at + j + 4] = static_cast<std::uint8_t>(mn[j]);
    } else {
      c.bytes[at + j + 4] = static_cast<std::uint8_t>((sc[j] & 0xF) | (mn[j] & 0xF) << 4);
      c.bytes[at + j - 4] |= static_cast<std::uint8_t>((sc[j] >> 4) << 6);
      c.bytes[at + j] |= static_cast<std::uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

void k4_values(Built& c, std::uint16_t hd, std::uint16_t hm, const int* sc, const int* mn,
               const int* q) {
  for (int v = 0; v < 256; ++v) {
    const double a = half_value(hd) * sc[v / 32] * q[v], m = half_value(hm) * mn[v / 32];
    c.value(a - m, std::abs(a) + std::abs(m));
  }
}

Built build_q4_k(Rng& rng, int blocks) {
  Built c{GgmlType::Q4_K, std::vector<std::uint8_t>(144 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 144 * i;
    const std::uint16_t hd = random_half(rng), hm = random_half(rng);
    put16(c.bytes, at, hd);
    put16(c.bytes, at + 2, hm);
    int sc[8], mn[8], q[256];
    for (int j = 0; j < 8; ++j) sc[j] = uniform(rng, 0, 63), mn[j] = uniform(rng, 0, 63);
    pack_scale_min_k4(c, at + 4, sc, mn);
    for (int& v : q) v = uniform(rng, 0, 15);
    // Each 64 values share 32 bytes: value l in the low nibble of byte l, value 32 + l high.
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        c.bytes[at + 16 + 32 * p + l] =
            static_cast<std::uint8_t>(q[64 * p + l] | q[64 * p + 32 + l] << 4);
      }
    }
    k4_values(c, hd, hm, sc, mn, q);
  }
  return c;
}

Built build_q5_k(Rng& rng, int blocks) {
  Built c{GgmlType::Q5_K, std::vector<std::uint8_t>(176 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 176 * i;
    const std::uint16_t hd = random_half(rng), hm = random_half(rng);
    put16(c.bytes, at, hd);
    put16(c.bytes, at + 2, hm);
    int sc[8], mn[8], q[256];
    for (int j = 0; j < 8; ++j) sc[j] = uniform(rng, 0, 63), mn[j] = uniform(rng, 0, 63);
    pack_scale_min_k4(c, at + 4, sc, mn);
    for (int& v : q) v = uniform(rng, 0, 31);
    // quantize_row_q5_K_ref: the fifth bits of the 64 values p*64 + l and p*64 + 32 + l go to
    // bits 2p and 2p + 1 of qh[l]; the nibbles as Q4_K.
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = q[64 * p + l], l2 = q[64 * p + 32 + l];
        c.bytes[at + 16 + l] |=
            static_cast<std::uint8_t>((l1 >> 4) << (2 * p) | (l2 >> 4) << (2 * p + 1));
        c.bytes[at + 48 + 32 * p + l] = static_cast<std::uint8_t>((l1 & 15) | (l2 & 15) << 4);
      }
    }
    k4_values(c, hd, hm, sc, mn, q);
  }
  return c;
}

Built build_q6_k(Rng& rng, int blocks) {
  Built c{GgmlType::Q6_K, std::vector<std::uint8_t>(210 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 210 * i;
    int q[256], sc[16];
    for (int& v : q) v = uniform(rng, 0, 63);
    // quantize_row_q6_K_ref: per 128-value half, ql[l] = value l | value l + 64 (high nibble),
    // ql[l + 32] = value l + 32 | value l + 96, qh[l] = their top 2 bits in that order.
    for (int half = 0; half < 2; ++half) {
      const int* v = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        c.bytes[at + 64 * half + l] =
            static_cast<std::uint8_t>((v[l] & 15) | (v[l + 64] & 15) << 4);
        c.bytes[at + 64 * half + l + 32] =
            static_cast<std::uint8_t>((v[l + 32] & 15) | (v[l + 96] & 15) << 4);
        c.bytes[at + 128 + 32 * half + l] = static_cast<std::uint8_t>(
            (v[l] >> 4) | (v[l + 32] >> 4) << 2 | (v[l + 64] >> 4) << 4 | (v[l + 96] >> 4) << 6);
      }
    }
    for (int j = 0; j < 16; ++j) {
      sc[j] = uniform(rng, -128, 127);
      c.bytes[at + 192 + j] = static_cast<std::uint8_t>(sc[j]);
    }
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at + 208, hd);
    for (int v = 0; v < 256; ++v) c.value(half_value(hd) * sc[v / 16] * (q[v] - 32));
  }
  return c;
}

Built build_q8_k(Rng& rng, int blocks) {
  Built c{GgmlType::Q8_K, std::vector<std::uint8_t>(292 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 292 * i;
    const float d = std::ldexp(static_cast<float>(uniform(rng, -4096, 4096)), -16);
    std::uint32_t bits;
    std::memcpy(&bits, &d, 4);
    put32(c.bytes, at, bits);
    int sums[16] = {};
    for (int v = 0; v < 256; ++v) {
      const int q = uniform(rng, -128, 127);
      c.bytes[at + 4 + v] = static_cast<std::uint8_t>(q);
      sums[v / 16] += q;
      c.value(static_cast<double>(d) * q);
    }
    for (int j = 0; j < 16; ++j)
      put16(c.bytes, at + 260 + 2 * j, static_cast<std::uint16_t>(sums[j]));
  }
  return c;
}

Built build_iq4_xs(Rng& rng, int blocks) {
  Built c{GgmlType::IQ4_XS, std::vector<std::uint8_t>(136 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 136 * i;
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at, hd);
    int ls[8], q[256];
    std::uint16_t scales_h = 0;
    for (int ib = 0; ib < 8; ++ib) {
      ls[ib] = uniform(rng, 0, 63);
      c.bytes[at + 4 + ib / 2] |= static_cast<std::uint8_t>((ls[ib] & 15) << (4 * (ib % 2)));
      scales_h |= static_cast<std::uint16_t>((ls[ib] >> 4) << (2 * ib));
    }
    put16(c.bytes, at + 2, scales_h);
    for (int& v : q) v = uniform(rng, 0, 15);
    for (int ib = 0; ib < 8; ++ib) {
      for (int j = 0; j < 16; ++j) {
        c.bytes[at + 8 + 16 * ib + j] =
            static_cast<std::uint8_t>(q[32 * ib + j] | q[32 * ib + 16 + j] << 4);
      }
    }
    for (int v = 0; v < 256; ++v) c.value(half_value(hd) * (ls[v / 32] - 32) * kIq4nl[q[v]]);
  }
  return c;
}

// ----------------------------------------------------------------------------- ternary, FP4, 1-2
// bit

// A byte of base-3 digits t (most significant first) as TQ1_0 stores it: the fraction
// value / 3^5 rounded up to 8 bits (quantize_row_tq1_0_ref).
std::uint8_t tq1_byte(const int* t, int digits, int stride) {
  int q = 0;
  for (int n = 0; n < 5; ++n) q = 3 * q + (n < digits ? t[n * stride] : 0);
  return static_cast<std::uint8_t>((q * 256 + 242) / 243);
}

Built build_tq1_0(Rng& rng, int blocks) {
  Built c{GgmlType::TQ1_0, std::vector<std::uint8_t>(54 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 54 * i;
    int t[256];
    for (int& v : t) v = uniform(rng, 0, 2);
    // Values 0-159: trit n of byte m is value 32n + m; 160-239: 16n + m of bytes 32-47;
    // 240-255: 4n + m of the 4 qh bytes (4 trits each).
    for (int m = 0; m < 32; ++m) c.bytes[at + m] = tq1_byte(t + m, 5, 32);
    for (int m = 0; m < 16; ++m) c.bytes[at + 32 + m] = tq1_byte(t + 160 + m, 5, 16);
    for (int m = 0; m < 4; ++m) c.bytes[at + 48 + m] = tq1_byte(t + 240 + m, 4, 4);
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at + 52, hd);
    for (int v = 0; v < 256; ++v) c.value((t[v] - 1) * half_value(hd));
  }
  return c;
}

Built build_tq2_0(Rng& rng, int blocks) {
  Built c{GgmlType::TQ2_0, std::vector<std::uint8_t>(66 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 66 * i;
    int q[256];
    for (int& v : q) v = uniform(rng, 0, 3);
    // Value 128h + 32l + m: bits 2l..2l+1 of byte 32h + m.
    for (int v = 0; v < 256; ++v) {
      const int h = v / 128, l = (v % 128) / 32, m = v % 32;
      c.bytes[at + 32 * h + m] |= static_cast<std::uint8_t>(q[v] << (2 * l));
    }
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at + 64, hd);
    for (int v = 0; v < 256; ++v) c.value((q[v] - 1) * half_value(hd));
  }
  return c;
}

// Scale bytes cover 0 (zero), the subnormal range, 0x7F (NaN code, read as zero) and normals.
Built build_nvfp4(Rng& rng, int blocks) {
  Built c{GgmlType::NVFP4, std::vector<std::uint8_t>(36 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 36 * i;
    int s[4], q[64];
    for (int k = 0; k < 4; ++k) {
      s[k] = i == 0 ? std::array<int, 4>{0, 3, 0x7F, 0x7E}[k] : uniform(rng, 1, 0x7E);
      c.bytes[at + k] = static_cast<std::uint8_t>(s[k]);
    }
    for (int& v : q) v = uniform(rng, 0, 15);
    // Sub-block k: byte j of its 8 holds value 16k + j (low) and 16k + j + 8 (high).
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 8; ++j) {
        c.bytes[at + 4 + 8 * k + j] =
            static_cast<std::uint8_t>(q[16 * k + j] | q[16 * k + j + 8] << 4);
      }
    }
    for (int v = 0; v < 64; ++v) c.value(e2m1(q[v]) * ue4m3(s[v / 16]));
  }
  return c;
}

Built build_q1_0(Rng& rng, int blocks) {
  Built c{GgmlType::Q1_0, std::vector<std::uint8_t>(18 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 18 * i;
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at, hd);
    for (int v = 0; v < 128; ++v) {
      const int bit = uniform(rng, 0, 1);
      c.bytes[at + 2 + v / 8] |= static_cast<std::uint8_t>(bit << (v % 8));
      c.value(bit ? half_value(hd) : -half_value(hd));
    }
  }
  return c;
}

Built build_q2_0(Rng& rng, int blocks) {
  Built c{GgmlType::Q2_0, std::vector<std::uint8_t>(18 * blocks), {}, {}};
  for (int i = 0; i < blocks; ++i) {
    const std::size_t at = 18 * i;
    const std::uint16_t hd = random_half(rng);
    put16(c.bytes, at, hd);
    for (int v = 0; v < 64; ++v) {
      const int q = uniform(rng, 0, 3);
      c.bytes[at + 2 + v / 4] |= static_cast<std::uint8_t>(q << (2 * (v % 4)));
      c.value((q - 1) * half_value(hd));
    }
  }
  return c;
}

// ----------------------------------------------------------------------------- element types

Built build_f32(Rng& rng, int count) {
  Built c{GgmlType::F32, std::vector<std::uint8_t>(4 * count), {}, {}};
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int v = 0; v < count; ++v) {
    const float f = dist(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put32(c.bytes, 4 * v, bits);
    c.value(f);
  }
  return c;
}

Built build_f16(Rng& rng, int count) {  // every finite code, subnormals included
  Built c{GgmlType::F16, std::vector<std::uint8_t>(2 * count), {}, {}};
  for (int v = 0; v < count; ++v) {
    const auto h = static_cast<std::uint16_t>(uniform(rng, 0, 0xFFFF) & ~(v % 2 ? 0x4000 : 0));
    const std::uint16_t finite = ((h >> 10) & 0x1f) == 0x1f ? h & 0xBFFF : h;
    put16(c.bytes, 2 * v, finite);
    c.value(half_value(finite));
  }
  return c;
}

Built build_bf16(Rng& rng, int count) {
  Built c{GgmlType::BF16, std::vector<std::uint8_t>(2 * count), {}, {}};
  for (int v = 0; v < count; ++v) {
    const auto b = static_cast<std::uint16_t>(uniform(rng, 0, 0xFFFF) & 0xDFFF);  // exp < 255
    put16(c.bytes, 2 * v, b);
    c.value(bf16_value(b));
  }
  return c;
}

// Every dequantizable type: a row of `blocks` blocks (values, for the element types).
std::vector<Built> build_all(Rng& rng, int blocks_32, int blocks_256, int elements) {
  std::vector<Built> all;
  all.push_back(build_f32(rng, elements));
  all.push_back(build_f16(rng, elements));
  all.push_back(build_bf16(rng, elements));
  all.push_back(build_q4_0(rng, blocks_32));
  all.push_back(build_q4_1(rng, blocks_32));
  all.push_back(build_q5_0(rng, blocks_32));
  all.push_back(build_q5_1(rng, blocks_32));
  all.push_back(build_q8_0(rng, blocks_32));
  all.push_back(build_iq4_nl(rng, blocks_32));
  all.push_back(build_mxfp4(rng, blocks_32));
  all.push_back(build_q2_k(rng, blocks_256));
  all.push_back(build_q3_k(rng, blocks_256));
  all.push_back(build_q4_k(rng, blocks_256));
  all.push_back(build_q5_k(rng, blocks_256));
  all.push_back(build_q6_k(rng, blocks_256));
  all.push_back(build_q8_k(rng, blocks_256));
  all.push_back(build_iq4_xs(rng, blocks_256));
  all.push_back(build_tq1_0(rng, blocks_256));
  all.push_back(build_tq2_0(rng, blocks_256));
  all.push_back(build_nvfp4(rng, blocks_32 / 2));
  all.push_back(build_q1_0(rng, blocks_32 / 4));
  all.push_back(build_q2_0(rng, blocks_32 / 2));
  return all;
}

std::string type_name(GgmlType t) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(t));
  return info ? std::string(info->name) : "?";
}

// Bytes placed so that they end where an inaccessible page begins: reading one byte past them
// faults.
class GuardedBytes {
 public:
  explicit GuardedBytes(std::span<const std::uint8_t> data) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    m_len = (data.size() + page - 1) / page * page + page;
    void* p = mmap(nullptr, m_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap");
    m_base = static_cast<std::uint8_t*>(p);
    if (mprotect(m_base + m_len - page, page, PROT_NONE) != 0) throw std::runtime_error("mprotect");
    m_data = m_base + m_len - page - data.size();
    if (!data.empty()) std::memcpy(m_data, data.data(), data.size());
  }
  ~GuardedBytes() { munmap(m_base, m_len); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  const std::uint8_t* data() const { return m_data; }

 private:
  std::uint8_t* m_base = nullptr;
  std::uint8_t* m_data = nullptr;
  std::size_t m_len = 0;
};

// Dequantizes `c` from guarded memory and checks every value against the formula.
void expect_decodes_to_formula(const Built& c) {
  SCOPED_TRACE(type_name(c.type));
  const auto n = static_cast<std::int64_t>(c.want.size());
  ASSERT_EQ(ggml_row_bytes(c.type, n), std::optional<std::uint64_t>(c.bytes.size()));
  const GuardedBytes src(c.bytes);
  std::vector<float> got(n);
  ggml_dequantize(c.type, src.data(), got.data(), n);
  int failures = 0;
  for (std::int64_t i = 0; i < n && failures < 8; ++i) {
    const double tol = 1e-6 * c.mag[i];  // a few float roundings of the terms
    if (!(std::abs(static_cast<double>(got[i]) - c.want[i]) <= tol)) {
      ADD_FAILURE() << "value " << i << ": got " << got[i] << ", want " << c.want[i];
      ++failures;
    }
  }
}

// ----------------------------------------------------------------------------- tests

TEST(GgmlTypes, NamesAndSizesMatchGgml) {
  struct Expected {
    std::uint32_t id;
    const char* name;
    int block, size;
    bool dequantizable;
  };
  // Block sizes from ggml-common.h (QK4_0 = 32 … QK_K = 256) and type sizes from its structs.
  const Expected table[] = {
      {0, "F32", 1, 4, true},          {1, "F16", 1, 2, true},
      {2, "Q4_0", 32, 18, true},       {3, "Q4_1", 32, 20, true},
      {6, "Q5_0", 32, 22, true},       {7, "Q5_1", 32, 24, true},
      {8, "Q8_0", 32, 34, true},       {9, "Q8_1", 32, 36, false},
      {10, "Q2_K", 256, 84, true},     {11, "Q3_K", 256, 110, true},
      {12, "Q4_K", 256, 144, true},    {13, "Q5_K", 256, 176, true},
      {14, "Q6_K", 256, 210, true},    {15, "Q8_K", 256, 292, true},
      {16, "IQ2_XXS", 256, 66, false}, {17, "IQ2_XS", 256, 74, false},
      {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
      {20, "IQ4_NL", 32, 18, true},    {21, "IQ3_S", 256, 110, false},
      {22, "IQ2_S", 256, 82, false},   {23, "IQ4_XS", 256, 136, true},
      {24, "I8", 1, 1, false},         {25, "I16", 1, 2, false},
      {26, "I32", 1, 4, false},        {27, "I64", 1, 8, false},
      {28, "F64", 1, 8, false},        {29, "IQ1_M", 256, 56, false},
      {30, "BF16", 1, 2, true},        {34, "TQ1_0", 256, 54, true},
      {35, "TQ2_0", 256, 66, true},    {39, "MXFP4", 32, 17, true},
      {40, "NVFP4", 64, 36, true},     {41, "Q1_0", 128, 18, true},
      {42, "Q2_0", 64, 18, true},
  };
  std::vector<bool> defined(64, false);
  for (const Expected& e : table) {
    SCOPED_TRACE(e.name);
    defined[e.id] = true;
    const GgmlTypeInfo* info = ggml_type_info(e.id);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name, e.name);
    EXPECT_EQ(info->block_size, e.block);
    EXPECT_EQ(info->type_size, e.size);
    EXPECT_EQ(info->dequantizable, e.dequantizable);
    EXPECT_EQ(ggml_type_info(static_cast<GgmlType>(e.id)), info);
  }
  for (std::uint32_t id = 0; id < defined.size(); ++id) {
    if (!defined[id]) {
      EXPECT_EQ(ggml_type_info(id), nullptr) << id;
    }
  }
  for (std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_EQ(ggml_type_info(id), nullptr) << id;
  }
}

TEST(GgmlTypes, RowBytes) {
  using U = std::optional<std::uint64_t>;
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 0), U(0));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 512), U(288));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q6_K, 4096), U(16 * 210));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_1, 64), U(40));
  EXPECT_EQ(ggml_row_bytes(GgmlType::F16, 3), U(6));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q1_0, 256), U(36));
  // Not a whole number of blocks, negative.
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 255), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 257), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 48), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, -1), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q8_0, -32), std::nullopt);
  // An undefined type.
  EXPECT_EQ(ggml_row_bytes(static_cast<GgmlType>(4), 32), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(static_cast<GgmlType>(99), 32), std::nullopt);
  // 64-bit overflow: 8 * (2^63 - 1) and 4 * 2^62 do not fit, 4 * 2^61 does; the largest Q8_K
  // row (2^55 - 1 blocks of 292 bytes) fits.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(ggml_row_bytes(GgmlType::F64, max), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::I64, max), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, std::int64_t{1} << 62), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, std::int64_t{1} << 61), U(std::uint64_t{1} << 63));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q8_K, max / 256 * 256), U((max / 256) * std::uint64_t{292}));
  EXPECT_EQ(ggml_row_bytes(GgmlType::I8, max), U(static_cast<std::uint64_t>(max)));
}

TEST(GgmlDequantize, Q4_0) {
  Rng rng(1);
  expect_decodes_to_formula(build_q4_0(rng, 8));
}
TEST(GgmlDequantize, Q4_1) {
  Rng rng(2);
  expect_decodes_to_formula(build_q4_1(rng, 8));
}
TEST(GgmlDequantize, Q5_0HighBits) {
  Rng rng(3);
  expect_decodes_to_formula(build_q5_0(rng, 8));
}
TEST(GgmlDequantize, Q5_1HighBits) {
  Rng rng(4);
  expect_decodes_to_formula(build_q5_1(rng, 8));
}
TEST(GgmlDequantize, Q8_0) {
  Rng rng(5);
  expect_decodes_to_formula(build_q8_0(rng, 8));
}
TEST(GgmlDequantize, Q2_K) {
  Rng rng(6);
  expect_decodes_to_formula(build_q2_k(rng, 3));
}
TEST(GgmlDequantize, Q3_KScalePackingAndHighMask) {
  Rng rng(7);
  expect_decodes_to_formula(build_q3_k(rng, 3));
}
TEST(GgmlDequantize, Q4_KScaleMinPacking) {
  Rng rng(8);
  expect_decodes_to_formula(build_q4_k(rng, 3));
}
TEST(GgmlDequantize, Q5_KScaleMinPackingAndHighBits) {
  Rng rng(9);
  expect_decodes_to_formula(build_q5_k(rng, 3));
}
TEST(GgmlDequantize, Q6_KLowHighSplit) {
  Rng rng(10);
  expect_decodes_to_formula(build_q6_k(rng, 3));
}
TEST(GgmlDequantize, Q8_K) {
  Rng rng(11);
  expect_decodes_to_formula(build_q8_k(rng, 3));
}
TEST(GgmlDequantize, IQ4_NL) {
  Rng rng(12);
  expect_decodes_to_formula(build_iq4_nl(rng, 8));
}
TEST(GgmlDequantize, IQ4_XS) {
  Rng rng(13);
  expect_decodes_to_formula(build_iq4_xs(rng, 3));
}
TEST(GgmlDequantize, TQ1_0Trits) {
  Rng rng(14);
  expect_decodes_to_formula(build_tq1_0(rng, 3));
}
TEST(GgmlDequantize, TQ2_0) {
  Rng rng(15);
  expect_decodes_to_formula(build_tq2_0(rng, 3));
}
TEST(GgmlDequantize, MXFP4IncludingSubnormalScales) {
  Rng rng(16);
  expect_decodes_to_formula(build_mxfp4(rng, 8));
}
TEST(GgmlDequantize, NVFP4IncludingZeroAndNanScales) {
  Rng rng(17);
  expect_decodes_to_formula(build_nvfp4(rng, 6));
}
TEST(GgmlDequantize, Q1_0) {
  Rng rng(18);
  expect_decodes_to_formula(build_q1_0(rng, 3));
}
TEST(GgmlDequantize, Q2_0) {
  Rng rng(19);
  expect_decodes_to_formula(build_q2_0(rng, 3));
}
TEST(GgmlDequantize, ElementTypesAnyCount) {
  Rng rng(20);
  for (int count : {1, 3, 255, 256, 257, 1000}) {
    SCOPED_TRACE(count);
    expect_decodes_to_formula(build_f32(rng, count));
    expect_decodes_to_formula(build_f16(rng, count));
    expect_decodes_to_formula(build_bf16(rng, count));
  }
}

// A hand-written Q4_K block, independent of the packer above: d = 0.5, dmin = 0.25, sub-block
// 5's scale 37 = 0b100101 (low nibble 5 in byte 9, top bits 0b10 in bits 6-7 of byte 1) and
// min 50 = 0b110010 (low nibble 2 in the high half of byte 9, top bits 0b11 in byte 5); its
// value 3 (sub-block 5 is the high nibbles of bytes 64..95 of qs) is quant 9.
TEST(GgmlDequantize, Q4_KHandPackedSubBlock) {
  std::vector<std::uint8_t> b(144, 0);
  b[0] = 0x00, b[1] = 0x38;  // 0.5 in fp16
  b[2] = 0x00, b[3] = 0x34;  // 0.25
  const std::size_t scales = 4;
  b[scales + 9] = 0x25;       // scale 5 low nibble 5, min 5 low nibble 2
  b[scales + 1] = 0b10 << 6;  // scale 5 top bits
  b[scales + 5] = 0b11 << 6;  // min 5 top bits
  b[16 + 64 + 3] = 0x90;      // sub-block 5 value 3 (high nibble), sub-block 4 value 3: 0
  std::vector<float> y(256);
  ggml_dequantize(GgmlType::Q4_K, b.data(), y.data(), 256);
  EXPECT_EQ(y[5 * 32 + 3], 0.5f * 37 * 9 - 0.25f * 50);
  EXPECT_EQ(y[5 * 32 + 4], -0.25f * 50);
  // Sub-block 1: scale = byte 1 & 63 = 0, min = byte 5 & 63 = 0, despite the top bits set.
  EXPECT_EQ(y[32 + 3], 0.0f);
  // Sub-block 4 reads byte 8 and the top bits of bytes 0 and 4: all zero.
  EXPECT_EQ(y[4 * 32 + 3], 0.0f);
}

// A hand-written Q6_K block: value 200 = half 1, l = 8, quarter 2 (values 64..95 of the half):
// low nibble in the high half of ql[64 + 8], top 2 bits at bits 4-5 of qh[32 + 8], scale
// sc[8 + 0 + 4] = sc[12].
TEST(GgmlDequantize, Q6_KHandPackedValue) {
  std::vector<std::uint8_t> b(210, 0);
  const int q = 0b101101;  // 45, value 45 - 32 = 13
  b[64 + 8] = static_cast<std::uint8_t>((q & 15) << 4);
  b[128 + 32 + 8] = static_cast<std::uint8_t>((q >> 4) << 4);
  b[192 + 12] = static_cast<std::uint8_t>(-3);
  b[208] = 0x00, b[209] = 0x40;  // d = 2
  std::vector<float> y(256);
  ggml_dequantize(GgmlType::Q6_K, b.data(), y.data(), 256);
  EXPECT_EQ(y[200], 2.0f * -3 * 13);
  // Every other value of sub-block 12 (values 192..207) is quant 0, i.e. -32.
  EXPECT_EQ(y[199], 2.0f * -3 * -32);
  EXPECT_EQ(y[208], 0.0f);  // sub-block 13, scale 0
}

TEST(GgmlDequantize, UnalignedSourceGivesTheSameValues) {
  Rng rng(21);
  for (const Built& c : build_all(rng, 8, 2, 300)) {
    SCOPED_TRACE(type_name(c.type));
    const auto n = static_cast<std::int64_t>(c.want.size());
    std::vector<float> aligned(n), shifted(n);
    std::vector<std::uint8_t> copy(c.bytes.size() + 1);
    std::memcpy(copy.data() + 1, c.bytes.data(), c.bytes.size());
    ggml_dequantize(c.type, c.bytes.data(), aligned.data(), n);
    ggml_dequantize(c.type, copy.data() + 1, shifted.data(), n);
    EXPECT_EQ(std::memcmp(aligned.data(), shifted.data(), n * sizeof(float)), 0);
    EXPECT_EQ(ggml_dot(c.type, c.bytes.data(), aligned.data(), n),
              ggml_dot(c.type, copy.data() + 1, aligned.data(), n));
  }
}

// ggml_dot against dequantize + a double dot, on random blocks of every type (from guarded
// memory, so a read past the row faults). The tolerance is relative to sum |w_i x_i|, the scale
// of the float rounding whatever cancellation the sum has.
TEST(GgmlDot, AgreesWithDequantizeThenDot) {
  Rng rng(22);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int round = 0; round < 3; ++round) {
    for (const Built& c : build_all(rng, 32, 4, round == 0 ? 1024 : 777 + round)) {
      SCOPED_TRACE(type_name(c.type));
      const auto n = static_cast<std::int64_t>(c.want.size());
      std::vector<float> x(n), w(n);
      for (float& v : x) v = dist(rng);
      const GuardedBytes row(c.bytes);
      ggml_dequantize(c.type, row.data(), w.data(), n);
      double want = 0, scale = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(w[i]) * x[i];
        scale += std::abs(static_cast<double>(w[i]) * x[i]);
      }
      const float got = ggml_dot(c.type, row.data(), x.data(), n);
      EXPECT_NEAR(got, want, 1e-5 * scale) << "n = " << n;
    }
  }
}

TEST(GgmlDot, EmptyRowIsZero) {
  EXPECT_EQ(ggml_dot(GgmlType::Q4_K, nullptr, nullptr, 0), 0.0f);
  ggml_dequantize(GgmlType::Q4_K, nullptr, nullptr, 0);  // nothing read or written
}

}  // namespace
}  // namespace kvlab
