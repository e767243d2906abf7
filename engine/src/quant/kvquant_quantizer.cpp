// KVQuant's quantizer: calibration (the offline step), the dense-and-sparse split, non-uniform
// codes, and keys turned back before RoPE for quantization and forward again after it. See
// kvquant_quantizer.h for the method, the reference it follows and the stored layout.
#include "quant/kvquant_quantizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "codec/bitpack.h"
#include "core/row_loader.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/quant/kvquant_rules.h"
#include "quant/lloyd_max.h"

namespace kvlab::detail {

namespace {

constexpr int kChunkTokens = kvquant_rules::kChunkTokens;

// ---- codes ---------------------------------------------------------------------------------

// Nearest level of a normalised u = fma(x, inv, bias): the number of midpoints below it (a tie
// goes to the lower level, as the reference's argmin over |u − level| picks the first), by
// lloyd_max.h's branch-free binary search over the midpoints in one register, 16 at a time.
template <int B>
void encode_channels(const float* x, const float* inv, const float* bias, const float* lo,
                     const float* up, const float* mids, int n, std::uint8_t* codes,
                     std::uint8_t* flags) {
  constexpr int NM = (1 << B) - 1;
  int i = 0;
#if defined(__AVX512F__)
  const __m512 table = level_search_table(mids, NM);
  const __m128i one = _mm_set1_epi8(1);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 u = _mm512_fmadd_ps(v, _mm512_loadu_ps(inv + i), _mm512_loadu_ps(bias + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i),
                     _mm512_cvtepi32_epi8(level_search16<B>(u, table)));
    const __mmask16 out = _mm512_cmp_ps_mask(v, _mm512_loadu_ps(up + i), _CMP_GT_OQ) |
                          _mm512_cmp_ps_mask(v, _mm512_loadu_ps(lo + i), _CMP_LT_OQ);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(flags + i), _mm_maskz_mov_epi8(out, one));
  }
#endif
  for (; i < n; ++i) {
    codes[i] = kvquant_rules::entry_code(x[i], inv[i], bias[i], mids, NM);
    flags[i] = kvquant_rules::key_outlier(x[i], lo[i], up[i]) ? 1 : 0;
  }
}

template <int B>
void encode_token(const float* x, float inv, float bias, const float* mids, int n,
                  std::uint8_t* codes) {
  constexpr int NM = (1 << B) - 1;
  int i = 0;
#if defined(__AVX512F__)
  const __m512 table = level_search_table(mids, NM);
  const __m512 vi = _mm512_set1_ps(inv), vb = _mm512_set1_ps(bias);
  for (; i + 16 <= n; i += 16) {
    const __m512 u = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vi, vb);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i),
                     _mm512_cvtepi32_epi8(level_search16<B>(u, table)));
  }
#endif
  for (; i < n; ++i) codes[i] = kvquant_rules::entry_code(x[i], inv, bias, mids, NM);
}

void encode_channels_any(int bits, const float* x, const float* inv, const float* bias,
                         const float* lo, const float* up, const std::vector<float>& mids, int n,
                         std::uint8_t* codes, std::uint8_t* flags) {
  switch (bits) {
    case 2:
      return encode_channels<2>(x, inv, bias, lo, up, mids.data(), n, codes, flags);
    case 3:
      return encode_channels<3>(x, inv, bias, lo, up, mids.data(), n, codes, flags);
    case 4:
      return encode_channels<4>(x, inv, bias, lo, up, mids.data(), n, codes, flags);
    default:  // more bits than the method ships (tests): the rules as they stand
      for (int i = 0; i < n; ++i) {
        codes[i] = kvquant_rules::entry_code(x[i], inv[i], bias[i], mids.data(),
                                             static_cast<int>(mids.size()));
        flags[i] = kvquant_rules::key_outlier(x[i], lo[i], up[i]) ? 1 : 0;
      }
  }
}

void encode_token_any(int bits, const float* x, float inv, float bias,
                      const std::vector<float>& mids, int n, std::uint8_t* codes) {
  switch (bits) {
    case 2:
      return encode_token<2>(x, inv, bias, mids.data(), n, codes);
    case 3:
      return encode_token<3>(x, inv, bias, mids.data(), n, codes);
    case 4:
      return encode_token<4>(x, inv, bias, mids.data(), n, codes);
    default:
      for (int i = 0; i < n; ++i) {
        codes[i] =
            kvquant_rules::entry_code(x[i], inv, bias, mids.data(), static_cast<int>(mids.size()));
      }
  }
}

}  // namespace

void kvquant_pack(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out,
                  std::size_t first) {
  if (bits == 1 || bits == 2 || bits == 4 || bits == 8) {
    pack_codes(codes, count, bits, out, first);
    return;
  }
  std::size_t i = 0;
  if (bits == 3 && first % 8 == 0) {  // eight codes to three bytes
    std::uint8_t* o = out + first / 8 * 3;
    for (; i + 8 <= count; i += 8, o += 3) {
      std::uint32_t w = 0;
      for (int j = 0; j < 8; ++j) w |= static_cast<std::uint32_t>(codes[i + j] & 7u) << (3 * j);
      o[0] = static_cast<std::uint8_t>(w);
      o[1] = static_cast<std::uint8_t>(w >> 8);
      o[2] = static_cast<std::uint8_t>(w >> 16);
    }
  }
  const unsigned mask = (1u << bits) - 1;
  for (; i < count; ++i) {
    const std::size_t bit = (first + i) * static_cast<std::size_t>(bits);
    const unsigned v = (codes[i] & mask) << (bit % 8);
    out[bit / 8] |= static_cast<std::uint8_t>(v);
    if (bit % 8 + bits > 8) out[bit / 8 + 1] |= static_cast<std::uint8_t>(v >> 8);
  }
}

namespace {

void unpack_stream(const std::uint8_t* packed, std::size_t first, std::size_t count, int bits,
                   std::uint8_t* codes) {
  if (bits == 1 || bits == 2 || bits == 4 || bits == 8) {
    unpack_codes(packed, first, count, bits, codes);
    return;
  }
  const unsigned mask = (1u << bits) - 1;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t bit = (first + i) * static_cast<std::size_t>(bits);
    unsigned v = packed[bit / 8];
    if (bit % 8 + bits > 8) v |= static_cast<unsigned>(packed[bit / 8 + 1]) << 8;
    codes[i] = static_cast<std::uint8_t>((v >> (bit % 8)) & mask);
  }
}

float fp16_round(float v) {
  return fp16_to_float(float_to_fp16(v));
}

}  // namespace

std::vector<float> kvquant_midpoints(const std::vector<float>& levels) {
  std::vector<float> m(levels.size() - 1);
  for (std::size_t j = 0; j + 1 < levels.size(); ++j) m[j] = 0.5f * (levels[j] + levels[j + 1]);
  return m;
}

KvQuantKeyRanges kvquant_key_ranges(const KvQuantCalibration& cal) {
  const std::size_t C = cal.lower.size();
  KvQuantKeyRanges r{std::vector<float>(C), std::vector<float>(C), std::vector<float>(C),
                     std::vector<float>(C)};
  for (std::size_t c = 0; c < C; ++c) {
    r.lower[c] = fp16_to_float(cal.lower[c]);
    r.upper[c] = fp16_to_float(cal.upper[c]);
    kvquant_rules::normaliser(r.lower[c], r.upper[c], r.inv[c], r.bias[c]);
  }
  return r;
}

ByteBreakdown kvquant_bytes(TensorRole role, int tokens, int heads, int dim, int sinks, int bits,
                            std::size_t nnz) {
  const std::size_t C = static_cast<std::size_t>(heads) * dim;
  const int S = std::min(sinks, tokens), Tq = tokens - S;
  ByteBreakdown b;
  const std::uint64_t units = role == TensorRole::Key ? C : static_cast<std::uint64_t>(Tq);
  b.codes = packed_bytes(static_cast<std::size_t>(Tq) * C, bits);
  b.scales = units * sizeof(std::uint16_t);
  b.zero_points = units * sizeof(std::uint16_t);
  b.residual = (static_cast<std::uint64_t>(S) * C + nnz) * sizeof(std::uint16_t);
  b.metadata = kTensorHeaderBytes + (std::uint64_t{1} << bits) * sizeof(float) +
               (2 + static_cast<std::uint64_t>(Tq) + 1 + nnz) * sizeof(std::int32_t);
  return b;
}

void kvquant_key_rope_angles(const RopeSpec& rope, int tokens, int sinks, bool inverse,
                             float* cos_out, float* sin_out) {
  const std::size_t half = static_cast<std::size_t>(rope.rotary_dims / 2);
  const auto piece = [&](int t0, int t1) {
    rope_angles(t0, t1, rope, inverse, cos_out + static_cast<std::size_t>(t0) * half,
                sin_out + static_cast<std::size_t>(t0) * half);
  };
  if (!inverse) return piece(0, tokens);  // dequantize() turns the whole tensor in one call
  const int S = std::min(sinks, tokens);
  piece(0, S);
  for (int t0 = S; t0 < tokens; t0 += kvquant_rules::kChunkTokens) {
    piece(t0, std::min(tokens, t0 + kvquant_rules::kChunkTokens));
  }
}

KvQuantConfig kvquant_config(const MethodConfig& c) {
  KvQuantConfig k;
  k.bits = c.bits;
  k.levels = c.normal_float ? KvQuantLevels::NormalFloat : KvQuantLevels::KMeans;
  k.outlier_fraction = c.outlier_fraction;
  k.calibration_tokens = c.calib_tokens;
  if (c.pre_rope) k.rope = c.key_rope;
  return k;
}

Status check_kvquant_config(const KvQuantConfig& c) {
  if (c.bits < 2 || c.bits > 8) {
    return make_error(fmt::format("kvquant: bits must be 2 to 8 (got {})", c.bits));
  }
  if (!(c.outlier_fraction >= 0.0 && c.outlier_fraction < 0.5)) {
    return make_error(
        fmt::format("kvquant: outlier fraction must be in [0, 0.5) (got {})", c.outlier_fraction));
  }
  if (c.sink_tokens < 0) {
    return make_error(fmt::format("kvquant: sink tokens must be >= 0 (got {})", c.sink_tokens));
  }
  if (c.calibration_tokens < 0) {
    return make_error(
        fmt::format("kvquant: calibration tokens must be >= 0 (got {})", c.calibration_tokens));
  }
  // The spec on its own (the keys' tokens and head_dim are checked when they come).
  if (auto ok = c.rope.check(0, c.rope.rotary_dims); !ok)
    return make_error("kvquant: " + ok.message());
  return Ok{};
}

KvQuantQuantizer::KvQuantQuantizer(KvQuantConfig config) : m_config(std::move(config)) {}

std::string KvQuantQuantizer::name() const {
  const KvQuantConfig& c = m_config;
  return fmt::format("kvquant-{} {} {:g}% outliers sink{} keys {}", c.bits,
                     c.levels == KvQuantLevels::KMeans ? "nuq" : "nf", 100.0 * c.outlier_fraction,
                     c.sink_tokens, keys_pre_rope() ? "pre-RoPE (RoPE after dequant)" : "as given");
}

Result<KvQuantCalibration> KvQuantQuantizer::calibrate(const TensorView& prefill,
                                                       TensorRole role) const {
  KVLAB_TRY(check_kvquant_config(m_config));
  const auto start = std::chrono::steady_clock::now();
  const KvQuantConfig& cfg = m_config;
  const int T = prefill.tokens(), C = prefill.heads() * prefill.dim();
  const int t0 = std::min(cfg.sink_tokens, T);
  const int t1 = cfg.calibration_tokens > 0 ? std::min(T, t0 + cfg.calibration_tokens) : T;
  const int n = t1 - t0;
  if (n <= 0 || C <= 0) {
    return make_error(
        fmt::format("kvquant: the {} calibration prefill has no tokens after its {} "
                    "sink tokens ({} tokens, {} x {})",
                    role_name(role), cfg.sink_tokens, T, prefill.heads(), prefill.dim()));
  }
  KvQuantCalibration cal;
  cal.role = role;
  cal.heads = prefill.heads();
  cal.dim = prefill.dim();
  std::vector<float> x(static_cast<std::size_t>(n) * C);
  load_rows(prefill, t0, t1, x.data());
  if (role == TensorRole::Key && keys_pre_rope()) {
    if (auto ok = cfg.rope.check(T, prefill.dim()); !ok) {
      return make_error("kvquant calibration keys: " + ok.message());
    }
    apply_rope_rows(x.data(), t0, t1, prefill.heads(), prefill.dim(), cfg.rope, /*inverse=*/true);
  }

  const bool kmeans = cfg.levels == KvQuantLevels::KMeans;
  const bool squared = cfg.weighting == KvQuantWeighting::SquaredMagnitude;
  std::vector<float> samples, weights;
  if (kmeans) samples.reserve(x.size());
  const auto add = [&](float v, float inv, float bias) {
    samples.push_back(std::clamp(v * inv + bias, -1.f, 1.f));
    if (squared) weights.push_back(v * v);
  };
  const double f = cfg.outlier_fraction;
  if (role == TensorRole::Key) {
    // Per channel thresholds over the calibration tokens (SimQuant.quantize, perchannel: the
    // percentiles t and 1 − t with t = 1 − f/2; f = 0 is min-max).
    // The channels in parallel on the engine's threads (a run on the GPU calibrates one tensor
    // at a time), 256 a round so that progress and a cancel are seen between rounds; each
    // channel's two percentiles by selection.
    cal.lower.resize(C);
    cal.upper.resize(C);
    constexpr int kRound = 256;
    for (int c0 = 0; c0 < C; c0 += kRound) {
      KVLAB_TRY(inner_progress(0.4 * c0 / C));  // about half the calibration's time
      tbb::parallel_for(
          tbb::blocked_range<int>(c0, std::min(C, c0 + kRound), 16),
          [&](const tbb::blocked_range<int>& r) {
            // The range's columns gathered in one pass over the rows (a row's
            // 16 channels share a cache line), then each selected.
            const int w = r.end() - r.begin();
            std::vector<float> cols(static_cast<std::size_t>(w) * n);
            for (int t = 0; t < n; ++t) {
              const float* row = x.data() + static_cast<std::size_t>(t) * C;
              for (int c = 0; c < w; ++c) {
                cols[static_cast<std::size_t>(c) * n + t] = row[r.begin() + c];
              }
            }
            for (int c = 0; c < w; ++c) {
              const std::span<float> col(cols.data() + static_cast<std::size_t>(c) * n,
                                         static_cast<std::size_t>(n));
              cal.lower[r.begin() + c] =
                  float_to_fp16(static_cast<float>(percentile_selected(col, f / 2)));
              cal.upper[r.begin() + c] =
                  float_to_fp16(static_cast<float>(percentile_selected(col, 1.0 - f / 2)));
            }
          });
    }
    if (kmeans) {
      const KvQuantKeyRanges r = kvquant_key_ranges(cal);
      const std::vector<float>&lo = r.lower, &up = r.upper, &inv = r.inv, &bias = r.bias;
      for (int t = 0; t < n; ++t) {
        const float* row = x.data() + static_cast<std::size_t>(t) * C;
        for (int c = 0; c < C; ++c) {
          if (f > 0.0 && (row[c] > up[c] || row[c] < lo[c])) continue;  // an outlier
          add(row[c], inv[c], bias[c]);
        }
      }
    }
  } else if (kmeans) {
    // Each token normalised as quantize() will normalise it, its outliers left out.
    TailScratch scratch;
    std::vector<int> out;
    const int k = outliers_per_side(f, C);
    for (int t = 0; t < n; ++t) {
      const float* row = x.data() + static_cast<std::size_t>(t) * C;
      float lower = 0.f, upper = 0.f, inv = 0.f, bias = 0.f;
      select_token_tails(row, C, k, scratch, lower, upper, out);
      kvquant_rules::normaliser(fp16_round(lower), fp16_round(upper), inv, bias);
      std::size_t o = 0;
      for (int c = 0; c < C; ++c) {
        if (o < out.size() && out[o] == c) {
          ++o;
          continue;
        }
        add(row[c], inv, bias);
      }
    }
  }
  KVLAB_TRY(inner_progress(0.45));
  cal.levels =
      kmeans ? weighted_kmeans_1d(samples, weights, 1 << cfg.bits) : normal_float_levels(cfg.bits);
  cal.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return cal;
}

Result<KvQuantCalibration> KvQuantQuantizer::self_calibration(const TensorView& x,
                                                              TensorRole role) const {
  if (x.tokens() <= m_config.sink_tokens) {  // nothing to code: any fitting calibration does
    KvQuantCalibration none{role, x.heads(), x.dim(), normal_float_levels(m_config.bits),
                            {},   {},        0.0};
    if (role == TensorRole::Key) {
      none.lower.assign(static_cast<std::size_t>(x.heads()) * x.dim(), 0);
      none.upper = none.lower;
    }
    return none;
  }
  return calibrate(x, role);
}

Result<QuantizedTensor> KvQuantQuantizer::quantize(const TensorView& x, TensorRole role) const {
  auto cal = self_calibration(x, role);
  if (!cal) return cal.error();
  return quantize(x, role, *cal);
}

Result<QuantizedTensor> KvQuantQuantizer::quantize(const TensorView& x, TensorRole role,
                                                   const KvQuantCalibration& cal) const {
  KVLAB_TRY(check_kvquant_config(m_config));
  const KvQuantConfig& cfg = m_config;
  const int bits = cfg.bits, L = 1 << bits;
  const int T = x.tokens(), H = x.heads(), D = x.dim(), C = H * D;
  const bool key = role == TensorRole::Key;
  if (cal.role != role || cal.heads != H || cal.dim != D ||
      cal.levels.size() != static_cast<std::size_t>(L) ||
      (key &&
       (cal.lower.size() != static_cast<std::size_t>(C) || cal.upper.size() != cal.lower.size()))) {
    return make_error(fmt::format(
        "kvquant: the calibration ({}, {} x {}, {} levels) does not fit the {} tensor ({} x {}, "
        "{} bits)",
        role_name(cal.role), cal.heads, cal.dim, cal.levels.size(), role_name(role), H, D, bits));
  }
  if (key && keys_pre_rope()) {
    if (auto ok = cfg.rope.check(T, D); !ok) return make_error("kvquant keys: " + ok.message());
  }
  // Keys go back before RoPE (the inverse rotation of their positions) as they are loaded.
  const auto load_pre_rope = [&](int r0, int r1, float* dst) {
    load_rows(x, r0, r1, dst);
    if (key && keys_pre_rope()) apply_rope_rows(dst, r0, r1, H, D, cfg.rope, /*inverse=*/true);
  };
  QuantizedTensor q{role, T, H, D, {}, {}, {}, {}, {}};
  const int S = std::min(cfg.sink_tokens, T), Tq = T - S;
  const std::size_t hd = static_cast<std::size_t>(C);
  q.codes.assign(packed_bytes(static_cast<std::size_t>(Tq) * hd, bits), 0);
  q.params = cal.levels;
  const std::vector<float> mids = kvquant_midpoints(cal.levels);

  // Sinks: fp16 as they are.
  std::vector<float> buf(static_cast<std::size_t>(std::max(S, std::min(kChunkTokens, Tq))) * hd);
  q.residual.resize(static_cast<std::size_t>(S) * hd);
  if (S > 0) {
    load_pre_rope(0, S, buf.data());
    float_to_fp16(std::span<const float>(buf.data(), q.residual.size()), q.residual);
  }
  std::vector<std::uint16_t> sparse_values;
  std::vector<int> row_ptr{0}, cols;
  row_ptr.reserve(static_cast<std::size_t>(Tq) + 1);
  std::vector<std::uint8_t> cbuf(static_cast<std::size_t>(kChunkTokens) * hd), flags(hd + 8, 0);
  const bool sparse = cfg.outlier_fraction > 0.0;

  KvQuantKeyRanges ranges;
  std::vector<float> tok_lower, tok_upper;
  if (key) {
    ranges = kvquant_key_ranges(cal);
  } else {
    tok_lower.resize(static_cast<std::size_t>(Tq));
    tok_upper.resize(static_cast<std::size_t>(Tq));
  }
  TailScratch scratch;
  std::vector<int> out;
  const int k_side = outliers_per_side(cfg.outlier_fraction, C);
  for (int t0 = S; t0 < T; t0 += kChunkTokens) {
    // Calibration took the first half of the tensor's time, coding takes the second.
    KVLAB_TRY(inner_progress(0.5 + 0.5 * (t0 - S) / std::max(T - S, 1)));
    const int rows = std::min(kChunkTokens, T - t0);
    load_pre_rope(t0, t0 + rows, buf.data());
    for (int r = 0; r < rows; ++r) {
      const float* row = buf.data() + static_cast<std::size_t>(r) * hd;
      std::uint8_t* codes = cbuf.data() + static_cast<std::size_t>(r) * hd;
      if (key) {
        encode_channels_any(bits, row, ranges.inv.data(), ranges.bias.data(), ranges.lower.data(),
                            ranges.upper.data(), mids, C, codes, flags.data());
        if (sparse) {  // scan the flags eight at a time; outliers are rare
          for (int c0 = 0; c0 < C; c0 += 8) {
            std::uint64_t w;
            std::memcpy(&w, flags.data() + c0, 8);
            if (w == 0) continue;
            for (int c = c0; c < std::min(C, c0 + 8); ++c) {
              if (!flags[c]) continue;
              cols.push_back(c);
              sparse_values.push_back(float_to_fp16(row[c]));
            }
          }
        }
      } else {
        const int tq = t0 + r - S;
        float lower = 0.f, upper = 0.f, iv = 0.f, bs = 0.f;
        select_token_tails(row, C, k_side, scratch, lower, upper, out);
        tok_lower[tq] = fp16_round(lower);
        tok_upper[tq] = fp16_round(upper);
        kvquant_rules::normaliser(tok_lower[tq], tok_upper[tq], iv, bs);
        encode_token_any(bits, row, iv, bs, mids, C, codes);
        for (int c : out) {
          cols.push_back(c);
          sparse_values.push_back(float_to_fp16(row[c]));
        }
      }
      row_ptr.push_back(static_cast<int>(cols.size()));
    }
    kvquant_pack(cbuf.data(), static_cast<std::size_t>(rows) * hd, bits, q.codes.data(),
                 static_cast<std::size_t>(t0 - S) * hd);
  }
  if (key) {
    q.params.insert(q.params.end(), ranges.lower.begin(), ranges.lower.end());
    q.params.insert(q.params.end(), ranges.upper.begin(), ranges.upper.end());
  } else {
    q.params.insert(q.params.end(), tok_lower.begin(), tok_lower.end());
    q.params.insert(q.params.end(), tok_upper.begin(), tok_upper.end());
  }
  const std::size_t nnz = cols.size();
  q.residual.insert(q.residual.end(), sparse_values.begin(), sparse_values.end());
  q.bounds.reserve(2 + row_ptr.size() + nnz);
  q.bounds = {S, static_cast<int>(nnz)};
  q.bounds.insert(q.bounds.end(), row_ptr.begin(), row_ptr.end());
  q.bounds.insert(q.bounds.end(), cols.begin(), cols.end());

  q.bytes = kvquant_bytes(role, T, H, D, S, bits, nnz);
  return q;
}

void KvQuantQuantizer::dequantize(const QuantizedTensor& q, std::span<float> out_span) const {
  const int bits = m_config.bits, L = 1 << bits;
  const int T = q.tokens, C = q.heads * q.dim;
  const std::size_t hd = static_cast<std::size_t>(C);
  const int S = q.bounds.at(0), nnz = q.bounds.at(1), Tq = T - S;
  const int* row_ptr = q.bounds.data() + 2;
  const int* cols = row_ptr + Tq + 1;
  const float* levels = q.params.data();
  const float* p_lo = levels + L;
  const bool key = q.role == TensorRole::Key;
  const float* p_up = p_lo + (key ? C : Tq);
  float* const out = out_span.data();
  fp16_to_float(std::span<const std::uint16_t>(q.residual.data(), static_cast<std::size_t>(S) * hd),
                out_span.first(static_cast<std::size_t>(S) * hd));
  std::vector<float> scale(hd), offset(hd);
  if (key) {
    for (std::size_t c = 0; c < hd; ++c) {
      scale[c] = 0.5f * (p_up[c] - p_lo[c]);
      offset[c] = 0.5f * (p_up[c] + p_lo[c]);
    }
  }
  std::vector<std::uint8_t> cbuf(static_cast<std::size_t>(kChunkTokens) * hd);
  for (int t0 = 0; t0 < Tq; t0 += kChunkTokens) {
    const int rows = std::min(kChunkTokens, Tq - t0);
    unpack_stream(q.codes.data(), static_cast<std::size_t>(t0) * hd,
                  static_cast<std::size_t>(rows) * hd, bits, cbuf.data());
    for (int r = 0; r < rows; ++r) {
      const int t = t0 + r;
      float* o = out + static_cast<std::size_t>(S + t) * hd;
      const std::uint8_t* cd = cbuf.data() + static_cast<std::size_t>(r) * hd;
      if (key) {
#pragma omp simd
        for (int c = 0; c < C; ++c) o[c] = levels[cd[c]] * scale[c] + offset[c];
      } else {
        const float sc = 0.5f * (p_up[t] - p_lo[t]), of = 0.5f * (p_up[t] + p_lo[t]);
#pragma omp simd
        for (int c = 0; c < C; ++c) o[c] = levels[cd[c]] * sc + of;
      }
      for (int j = row_ptr[t]; j < row_ptr[t + 1]; ++j) {
        o[cols[j]] = fp16_to_float(q.residual[static_cast<std::size_t>(S) * hd + j]);
      }
    }
  }
  (void)nnz;
  if (key && keys_pre_rope()) apply_rope_rows(out, 0, T, q.heads, q.dim, m_config.rope);
}

std::vector<CodeHistogram> KvQuantQuantizer::histograms(const QuantizedTensor& q) const {
  const int bits = m_config.bits;
  CodeHistogram h{fmt::format("kvquant {} {}{}", role_name(q.role),
                              m_config.levels == KvQuantLevels::KMeans ? "nuq" : "nf", bits),
                  bits, std::vector<std::uint64_t>(std::size_t{1} << bits, 0)};
  const std::size_t hd = static_cast<std::size_t>(q.heads) * q.dim;
  const int S = q.bounds.at(0), Tq = q.tokens - S;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(Tq) * hd);
  unpack_stream(q.codes.data(), 0, codes.size(), bits, codes.data());
  for (std::uint8_t c : codes) ++h.counts[c];
  const int* row_ptr = q.bounds.data() + 2;
  const int* cols = row_ptr + Tq + 1;
  for (int t = 0; t < Tq; ++t) {
    for (int j = row_ptr[t]; j < row_ptr[t + 1]; ++j) --h.counts[codes[t * hd + cols[j]]];
  }
  return {h};
}

std::unique_ptr<KvQuantQuantizer> make_kvquant_quantizer(const KvQuantConfig& config) {
  return std::make_unique<KvQuantQuantizer>(config);
}

}  // namespace kvlab::detail
