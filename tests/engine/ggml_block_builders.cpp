// The packing side of ggml_block_builders.h, written from llama.cpp's quantize_row_*_ref
// (ggml-quants.c) and the block structs of ggml-common.h, never from kvlab's own decoder.
#include "ggml_block_builders.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace kvlab::ggml_test {
namespace {

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

}  // namespace

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

namespace {

// Q5_0 / Q5_1: nibbles as Q4, the fifth bit of value v in bit v of the 32-bit qh.
void pack_q5(Built& c, std::size_t qh_at, const int* q) {
  std::uint32_t qh = 0;
  for (int v = 0; v < 32; ++v) qh |= static_cast<std::uint32_t>(q[v] >> 4) << v;
  put32(c.bytes, qh_at, qh);
  for (int j = 0; j < 16; ++j) {
    c.bytes[qh_at + 4 + j] = static_cast<std::uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
  }
}

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

// --------------------------------------------------------------------------- ternary, FP4, 1-2 bit

namespace {

// A byte of base-3 digits t (most significant first) as TQ1_0 stores it: the fraction
// value / 3^5 rounded up to 8 bits (quantize_row_tq1_0_ref).
std::uint8_t tq1_byte(const int* t, int digits, int stride) {
  int q = 0;
  for (int n = 0; n < 5; ++n) q = 3 * q + (n < digits ? t[n * stride] : 0);
  return static_cast<std::uint8_t>((q * 256 + 242) / 243);
}

}  // namespace

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

}  // namespace kvlab::ggml_test
