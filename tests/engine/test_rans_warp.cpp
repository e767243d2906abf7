// The warp rANS decoder, its attention consumers and the warp encoder (rans_warp.h), run on the CPU
// with 32 threads standing in for a warp's lanes: ballot, shuffle and warp barrier meet at a
// std::barrier, so the code the CUDA kernels (kernels/src/rans_attention.cu) compile is the code
// tested here, lane for lane. It must decode what the engine encodes, as the engine's own
// decoder does, flag the corrupt blocks the scalar decoder rejects, and give attention logits
// and values that match a double-precision reference over decode_codes()'s codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "codec/codec_streams.h"
#include "codec/rans_streams.h"
#include "core/random.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/rans_warp.h"

namespace kvlab {
namespace {

using rans_warp::kLanes;

// What the lanes exchange: one slot per lane, read by all after a barrier.
struct Exchange {
  std::barrier<> bar{kLanes};
  std::array<std::uint32_t, kLanes> u{};
  std::array<float, kLanes> f{};
};

class ThreadWarp {
 public:
  ThreadWarp(Exchange& x, int lane) : m_x(x), m_lane(lane) {}
  int lane() const { return m_lane; }
  std::uint32_t ballot(bool p) {
    m_x.u[static_cast<std::size_t>(m_lane)] = p ? 1u : 0u;
    m_x.bar.arrive_and_wait();
    std::uint32_t mask = 0;
    for (int l = 0; l < kLanes; ++l) mask |= m_x.u[static_cast<std::size_t>(l)] << l;
    m_x.bar.arrive_and_wait();
    return mask;
  }
  std::uint32_t shfl(std::uint32_t v, int src) {
    m_x.u[static_cast<std::size_t>(m_lane)] = v;
    m_x.bar.arrive_and_wait();
    const std::uint32_t r = m_x.u[static_cast<std::size_t>(src)];
    m_x.bar.arrive_and_wait();
    return r;
  }
  float shfl_xor(float v, int mask) {
    m_x.f[static_cast<std::size_t>(m_lane)] = v;
    m_x.bar.arrive_and_wait();
    const float r = m_x.f[static_cast<std::size_t>(m_lane ^ mask)];
    m_x.bar.arrive_and_wait();
    return r;
  }
  bool all(bool p) { return ballot(p) == 0xffffffffu; }
  void sync() { m_x.bar.arrive_and_wait(); }
  std::uint32_t load(const std::uint32_t* p) const { return *p; }

 private:
  Exchange& m_x;
  int m_lane;
};

// Runs body(warp) on 32 threads, one a lane.
void run_warp(const std::function<void(ThreadWarp&)>& body) {
  Exchange x;
  std::vector<std::jthread> lanes;
  for (int l = 0; l < kLanes; ++l) {
    lanes.emplace_back([&x, &body, l] {
      ThreadWarp w(x, l);
      body(w);
    });
  }
}

// A tensor's rANS streams as a GPU holds them: the payload as words with two words of slack.
struct Stream {
  int tokens, heads, dim, block_size;
  std::vector<std::uint8_t> codes;  // [token][head][dim]
  HuffmanCodebook book;
  EncodedCodes enc;
  std::vector<std::uint32_t> words;

  rans_warp::Block block(int b, std::uint8_t* tile) const {
    rans_warp::Block a;
    a.payload = words.data();
    a.payload_words = words.size();
    a.begin = enc.block_offsets[static_cast<std::size_t>(b)];
    a.end = detail::block_end(enc, b);
    a.tokens = std::min(block_size, tokens - (b / heads) * block_size);
    a.dim = dim;
    a.pairs = book.rans()->pairs();
    a.slots = book.rans()->slot_table();
    a.escape_start = book.rans()->escape_start();
    a.tile = tile;
    return a;
  }
  void set_words() {
    words.assign((enc.payload.size() + 3) / 4 + 2, 0u);
    std::memcpy(words.data(), enc.payload.data(), enc.payload.size());
  }
};

// Codes around a centre with a spread of about 2-4 bits. The book is made from the first
// `train` tokens only; after them a fraction `rare` of the codes are ones the book never saw (for a
// pair book, pairs it never saw), which go through the escape.
Stream make_stream(int tokens, int heads, int dim, int block_size, bool pairs, std::uint64_t seed,
                   int train, double rare = 0.02) {
  Stream s{tokens, heads, dim, block_size, {}, {}, {}, {}};
  detail::Rng rng(seed);
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * dim;
  const std::size_t trained = static_cast<std::size_t>(train) * heads * dim;
  const int centre = pairs ? 6 : 30;
  s.codes.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    int c =
        std::clamp(centre + static_cast<int>(std::lround(2.0 * rng.normal())), 0, pairs ? 13 : 59);
    if (i >= trained && rng.uniform() < rare) {
      c = pairs ? 14 + static_cast<int>(rng.below(2)) : 60 + static_cast<int>(rng.below(190));
    }
    s.codes[i] = static_cast<std::uint8_t>(c);
  }
  const std::span<const std::uint8_t> head(s.codes.data(), trained);
  auto book = HuffmanCodebook::from_histogram(
      pairs ? count_code_pairs(head, dim) : count_codes(head), pairs, true);
  EXPECT_TRUE(book.ok()) << book.message();
  s.book = std::move(*book);
  auto enc = encode_codes(s.codes, tokens, heads, dim, {CodecKind::Rans, block_size, 0}, &s.book);
  EXPECT_TRUE(enc.ok()) << enc.message();
  s.enc = std::move(*enc);
  s.set_words();
  return s;
}

// Copies each chunk's rows out of the tile (lane 0 does it).
struct CopyRows {
  const std::uint8_t* tile;
  int row, dim;
  std::uint8_t* out;  // [token of the block][dim]
  template <class Warp>
  void operator()(Warp& w, int c0, int m) {
    if (w.lane() != 0) return;
    for (int t = 0; t < m; ++t) {
      std::memcpy(out + static_cast<std::size_t>(c0 + t) * dim, tile + t * row, dim);
    }
  }
};

// Decodes block b on the emulated warp; the block's codes [token][dim], or false.
bool warp_decode(const Stream& s, int b, std::vector<std::uint8_t>& out) {
  std::vector<std::uint8_t> tile(
      static_cast<std::size_t>(rans_warp::kChunk * rans_warp::tile_row(s.dim)), 0xcd);
  const rans_warp::Block a = s.block(b, tile.data());
  out.assign(static_cast<std::size_t>(a.tokens) * s.dim, 0);
  std::array<int, kLanes> ok{};
  run_warp([&](ThreadWarp& w) {
    CopyRows copy{tile.data(), rans_warp::tile_row(s.dim), s.dim, out.data()};
    ok[static_cast<std::size_t>(w.lane())] = rans_warp::decode_block(w, a, copy) ? 1 : 0;
  });
  for (int v : ok) EXPECT_EQ(v, ok[0]) << "lanes disagree on the outcome";
  return ok[0] == 1;
}

std::vector<std::uint8_t> block_codes(const Stream& s, int b) {
  const int tb = b / s.heads, h = b % s.heads;
  const int first = tb * s.block_size, n = std::min(s.block_size, s.tokens - first);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * s.dim);
  for (int t = 0; t < n; ++t) {
    for (int c = 0; c < s.dim; ++c) {
      out[static_cast<std::size_t>(t) * s.dim + c] =
          s.codes[(static_cast<std::size_t>(first + t) * s.heads + h) * s.dim + c];
    }
  }
  return out;
}

// Symbols of the stream the table does not hold (written as the escape and 8 raw bits).
int count_escapes(const Stream& s) {
  const RansTable& t = *s.book.rans();
  const std::size_t vectors = s.codes.size() / static_cast<std::size_t>(s.dim);
  int n = 0;
  for (std::size_t v = 0; v < vectors; ++v) {
    const std::uint8_t* c = s.codes.data() + v * static_cast<std::size_t>(s.dim);
    for (int j = 0; j < rans_warp::symbols_per_vector(s.dim, t.pairs()); ++j) {
      const int sym = t.pairs() ? c[2 * j] | (2 * j + 1 < s.dim ? c[2 * j + 1] << 4 : 0) : c[j];
      n += t.frequency(sym) == 0;
    }
  }
  return n;
}

struct Shape {
  int tokens, heads, dim, block_size;
  bool pairs;
  double rare = 0.02;
};

TEST(RansWarp, DecodesEveryBlockAsEncoded) {
  // Odd dims, one code a vector, blocks of one token, blocks longer than a chunk and a short
  // last block; pairs and single codes; escapes in both (codes the book never saw).
  // The last two are mostly escapes (about 20 bits a symbol, up to 64 words a round): the word
  // window's far half is read.
  const Shape shapes[] = {{70, 2, 64, 64, true},       {37, 1, 7, 16, true},
                          {9, 3, 1, 4, false},         {100, 1, 33, 100, false},
                          {5, 2, 128, 1, true},        {66, 1, 3, 40, false},
                          {48, 1, 64, 48, false, 0.9}, {40, 1, 30, 40, true, 0.9}};
  int escapes = 0;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(testing::Message() << sh.tokens << "x" << sh.heads << "x" << sh.dim << " block "
                                    << sh.block_size << (sh.pairs ? " pairs" : " codes"));
    const Stream s = make_stream(sh.tokens, sh.heads, sh.dim, sh.block_size, sh.pairs, 7 + sh.dim,
                                 sh.tokens / 4, sh.rare);
    ASSERT_EQ(s.book.rans()->pairs(), sh.pairs);
    escapes += count_escapes(s);
    for (int b = 0; b < s.enc.block_count(); ++b) {
      std::vector<std::uint8_t> got;
      ASSERT_TRUE(warp_decode(s, b, got)) << "block " << b;
      ASSERT_EQ(got, block_codes(s, b)) << "block " << b;
    }
  }
  EXPECT_GT(escapes, 0);
}

// Random damage (one to three flipped bits anywhere in a three-block stream, escapes included,
// pair and single-code books): for every block the warp gives the scalar decoder's verdict, and
// where both accept it, the same codes.
TEST(RansWarp, FlagsTheCorruptBlocksTheScalarDecoderRejects) {
  int rejected = 0, accepted_damaged = 0;
  for (const bool pairs : {true, false}) {
    const Stream clean = make_stream(150, 1, 16, 64, pairs, pairs ? 3 : 4, 40, 0.3);
    const RansTable& t = *clean.book.rans();
    const int symbols = rans_warp::symbols_per_vector(16, pairs);
    detail::Rng rng(pairs ? 11 : 12);
    for (int v = 0; v < 60; ++v) {
      Stream s = clean;
      // Flip bits of states or words; blocks keep their sizes (validate_encoded checks sizes).
      const int flips = 1 + static_cast<int>(rng.below(3));
      for (int f = 0; f < flips; ++f) {
        s.enc.payload[rng.below(s.enc.payload.size())] ^=
            static_cast<std::uint8_t>(1u << rng.below(8));
      }
      s.set_words();
      for (int b = 0; b < s.enc.block_count(); ++b) {
        SCOPED_TRACE(testing::Message()
                     << (pairs ? "pairs" : "codes") << " trial " << v << " block " << b);
        const std::uint64_t begin = s.enc.block_offsets[static_cast<std::size_t>(b)];
        const std::uint64_t end = detail::block_end(s.enc, b);
        const int n = std::min(64, 150 - 64 * b);
        std::vector<std::uint8_t> scalar(static_cast<std::size_t>(n * symbols));
        const char* problem = detail::decode_rans_block_scalar(
            s.enc.payload.data() + begin, end - begin, scalar.size(), t, scalar.data());
        std::vector<std::uint8_t> got;
        const bool ok = warp_decode(s, b, got);
        ASSERT_EQ(ok, problem == nullptr) << (problem ? problem : "");
        if (!ok) {
          ++rejected;
          continue;
        }
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(n) * 16);
        if (pairs) {
          detail::pair_symbols_to_codes(scalar.data(), n * 16, codes.data());
        } else {
          codes = scalar;
        }
        EXPECT_EQ(got, codes);
        accepted_damaged += got != block_codes(clean, b);
      }
    }
  }
  EXPECT_GT(rejected, 80);
  std::printf("[ rans warp ] damaged blocks rejected: %d; damaged but accepted: %d\n", rejected,
              accepted_damaged);
  // A block with a word too few or too many is corrupt, whatever its bits.
  const Stream clean = make_stream(64, 1, 16, 64, true, 3, 64);
  for (int cut : {-2, 2}) {
    Stream s = clean;
    if (cut < 0) {
      s.enc.payload.resize(s.enc.payload.size() - 2);
    } else {
      s.enc.payload.resize(s.enc.payload.size() + 2, 0);
    }
    s.set_words();
    std::vector<std::uint8_t> got;
    EXPECT_FALSE(warp_decode(s, 0, got)) << cut;
  }
}

// The warp encoder writes the engine encoder's bytes, block by block: states, then the words in
// the decoder's order.
TEST(RansWarp, EncodesTheEnginesBytes) {
  const Shape shapes[] = {{70, 2, 64, 64, true},     {37, 1, 7, 16, true},
                          {9, 3, 1, 4, false},       {100, 1, 33, 100, false},
                          {5, 2, 128, 1, true},      {48, 1, 64, 48, false, 0.9},
                          {40, 1, 30, 40, true, 0.9}};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(testing::Message() << sh.tokens << "x" << sh.heads << "x" << sh.dim << " block "
                                    << sh.block_size << (sh.pairs ? " pairs" : " codes"));
    const Stream s = make_stream(sh.tokens, sh.heads, sh.dim, sh.block_size, sh.pairs, 40 + sh.dim,
                                 sh.tokens / 4, sh.rare);
    const RansTable& t = *s.book.rans();
    std::vector<std::uint32_t> table(RansTable::kSymbols);
    for (int v = 0; v < RansTable::kSymbols; ++v) {
      table[static_cast<std::size_t>(v)] = rans_warp::encode_entry(t.frequency(v), t.cumulative(v));
    }
    for (int b = 0; b < s.enc.block_count(); ++b) {
      const int tb = b / sh.heads, h = b % sh.heads;
      const int first = tb * sh.block_size, n = std::min(sh.block_size, sh.tokens - first);
      rans_warp::BlockCodes src;
      src.codes = s.codes.data() + (static_cast<std::size_t>(first) * sh.heads + h) * sh.dim;
      src.token_stride = static_cast<std::uint64_t>(sh.heads) * sh.dim;
      src.dim = sh.dim;
      src.pairs = t.pairs();
      const std::size_t symbols =
          static_cast<std::size_t>(n) * rans_warp::symbols_per_vector(sh.dim, t.pairs());
      std::vector<std::uint16_t> emitted(2 * symbols + 1, 0);
      std::array<std::uint32_t, kLanes> states{}, counts{};
      run_warp([&](ThreadWarp& w) {
        std::uint32_t x = 0;
        const std::uint32_t words = rans_warp::encode_block(
            w, src, n, table.data(),
            [&](std::uint32_t e, std::uint32_t word) {
              emitted.at(e) = static_cast<std::uint16_t>(word);
            },
            x);
        states[static_cast<std::size_t>(w.lane())] = x;
        counts[static_cast<std::size_t>(w.lane())] = words;
      });
      for (std::uint32_t c : counts) ASSERT_EQ(c, counts[0]);
      std::vector<std::uint8_t> got(rans_warp::kStateBytes + 2 * counts[0]);
      std::memcpy(got.data(), states.data(), rans_warp::kStateBytes);
      for (std::uint32_t i = 0; i < counts[0]; ++i) {
        std::memcpy(got.data() + rans_warp::kStateBytes + 2 * i, &emitted[counts[0] - 1 - i], 2);
      }
      const std::uint64_t begin = s.enc.block_offsets[static_cast<std::size_t>(b)];
      const std::vector<std::uint8_t> want(s.enc.payload.data() + begin,
                                           s.enc.payload.data() + detail::block_end(s.enc, b));
      ASSERT_EQ(got, want) << "block " << b;
    }
  }
}

// Attention over the whole tensor on the emulated warp, block by block, against a double
// reference over decode_codes(): logits q.k / sqrt(dim) and values sum p v, with KVComp's
// per-(block, head, channel) key steps and per-(token, head) value steps.
template <int G>
void check_attention(const Shape& sh, std::uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "G " << G << ", " << sh.tokens << "x" << sh.heads << "x"
                                  << sh.dim << " block " << sh.block_size);
  const Stream s =
      make_stream(sh.tokens, sh.heads, sh.dim, sh.block_size, sh.pairs, seed, sh.tokens);
  const int dim = sh.dim, heads = sh.heads, T = sh.tokens, tbs = s.enc.token_blocks();
  detail::Rng rng(seed + 1);
  std::vector<float> ksteps(static_cast<std::size_t>(tbs) * heads * dim), kmins(ksteps.size()),
      vsteps(static_cast<std::size_t>(T) * heads), vmins(vsteps.size()),
      q(static_cast<std::size_t>(heads) * G * dim), p(static_cast<std::size_t>(heads) * G * T);
  for (auto& v : ksteps) v = static_cast<float>(0.01 + 0.05 * rng.uniform());
  for (auto& v : kmins) v = static_cast<float>(-0.5 * rng.uniform());
  for (auto& v : vsteps) v = static_cast<float>(0.01 + 0.05 * rng.uniform());
  for (auto& v : vmins) v = static_cast<float>(-0.3 * rng.uniform());
  for (auto& v : q) v = static_cast<float>(rng.normal());
  for (auto& v : p) v = static_cast<float>(rng.uniform() / T);
  std::vector<std::uint8_t> codes(s.codes.size());
  ASSERT_TRUE(decode_codes(s.enc, &s.book, codes).ok());
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));

  const int row = rans_warp::tile_row(dim), channels = (dim + 3) & ~3;
  std::vector<std::uint8_t> tile(static_cast<std::size_t>(rans_warp::kChunk * row));
  std::vector<float> qf(static_cast<std::size_t>(channels) * G), weights(rans_warp::kChunk * G);
  std::vector<float> logits(static_cast<std::size_t>(heads) * G * T, NAN),
      out(static_cast<std::size_t>(heads) * G * dim, 0.f);
  for (int h = 0; h < heads; ++h) {
    // One warp a head, as the kernels run a head's blocks on the warps of a CUDA block.
    std::array<int, kLanes> ok{};
    std::mutex add_mutex;
    run_warp([&](ThreadWarp& w) {
      rans_warp::Values<G> val;
      val.steps = vsteps.data();
      val.mins = vmins.data();
      val.probs = p.data() + static_cast<std::size_t>(h) * G * T;
      val.weights = weights.data();
      val.tile = tile.data();
      val.row = row;
      val.dim = dim;
      val.heads = heads;
      val.head = h;
      val.tokens = static_cast<std::uint64_t>(T);
      bool good = true;
      for (int tb = 0; tb < tbs; ++tb) {
        const int b = tb * heads + h;
        rans_warp::Logits<G> lg;
        lg.tile = tile.data();
        lg.row = row;
        lg.channels = channels;
        lg.logits = logits.data() + static_cast<std::size_t>(h) * G * T;
        lg.tokens = static_cast<std::uint64_t>(T);
        lg.first = static_cast<std::uint64_t>(tb) * sh.block_size;
        const std::size_t unit = (static_cast<std::size_t>(tb) * heads + h) * dim;
        lg.prepare(w, qf.data(), q.data() + static_cast<std::size_t>(h) * G * dim,
                   ksteps.data() + unit, kmins.data() + unit, dim, scale);
        good &= rans_warp::decode_block(w, s.block(b, tile.data()), lg);
        val.first = lg.first;
        // The values stream has the same shape; decode it into the same tile.
        good &= rans_warp::decode_block(w, s.block(b, tile.data()), val);
      }
      val.flush(w, [&](int g, int c, float v) {
        std::lock_guard lock(add_mutex);
        out[(static_cast<std::size_t>(h) * G + g) * dim + c] += v;
      });
      ok[static_cast<std::size_t>(w.lane())] = good;
    });
    for (int v : ok) ASSERT_EQ(v, 1);
  }
  double worst_logit = 0, worst_value = 0;
  for (int h = 0; h < heads; ++h) {
    for (int g = 0; g < G; ++g) {
      const std::size_t qh = static_cast<std::size_t>(h) * G + g;
      for (int t = 0; t < T; ++t) {
        const std::size_t unit = (static_cast<std::size_t>(t / sh.block_size) * heads + h) * dim;
        double ref = 0, mag = 0;
        for (int c = 0; c < dim; ++c) {
          const double k =
              kmins[unit + c] +
              double(codes[(static_cast<std::size_t>(t) * heads + h) * dim + c]) * ksteps[unit + c];
          ref += double(q[qh * dim + c]) * k;
          mag += std::abs(double(q[qh * dim + c]) * k);
        }
        ref *= scale;
        worst_logit =
            std::max(worst_logit, std::abs(logits[qh * T + t] - ref) / (mag * scale + 1e-6));
      }
      for (int c = 0; c < dim; ++c) {
        double ref = 0, mag = 0;
        for (int t = 0; t < T; ++t) {
          const std::size_t th = static_cast<std::size_t>(t) * heads + h;
          const double v = vmins[th] + double(codes[th * dim + c]) * vsteps[th];
          ref += double(p[qh * T + t]) * v;
          mag += std::abs(double(p[qh * T + t]) * v);
        }
        worst_value = std::max(worst_value, std::abs(out[qh * dim + c] - ref) / (mag + 1e-9));
      }
    }
  }
  // float32 sums of up to a few hundred terms: relative to the sum of magnitudes, 1e-5 leaves
  // room for the rounding and none for a wrong code, step or token (each moves a term whole).
  EXPECT_LT(worst_logit, 1e-5);
  EXPECT_LT(worst_value, 1e-5);
}

TEST(RansWarp, AttentionMatchesADoubleReference) {
  check_attention<1>({70, 2, 64, 32, true}, 21);
  check_attention<4>({45, 1, 7, 16, true}, 22);
  check_attention<2>({40, 2, 33, 40, false}, 23);
}

}  // namespace
}  // namespace kvlab
