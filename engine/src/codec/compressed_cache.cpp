#include "kvlab/engine/codec/compressed_cache.h"

#include <cmath>

#include <fmt/format.h>

#include "quant/group_quant.h"

namespace kvlab {

namespace {

// KVComp's quantizer as group quantization (float32 parameters).
detail::GroupSpec kvcomp_spec(const CompressedCacheConfig& c) {
  return detail::kvcomp_group_spec(c.block_size, c.rel_scale);
}

TensorView fp16_rows(const std::vector<std::uint16_t>& rows, int tokens, int heads, int dim) {
  return TensorView(reinterpret_cast<const std::byte*>(rows.data()), DType::F16, tokens, heads, dim,
                    static_cast<std::ptrdiff_t>(heads) * dim, dim);
}

void append_fp16(std::vector<std::uint16_t>& out, const float* row, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n);
  float_to_fp16(std::span<const float>(row, n), std::span<std::uint16_t>(out.data() + at, n));
}

// Sizes of an encoding before an append, to undo it.
struct CodesMark {
  int tokens = 0;
  std::size_t payload = 0, offsets = 0, bits = 0;
};

CodesMark mark_of(const EncodedCodes& e) {
  return {e.tokens, e.payload.size(), e.block_offsets.size(), e.vector_bits.size()};
}

void truncate_to(EncodedCodes& e, const CodesMark& m) {
  e.tokens = m.tokens;
  e.payload.resize(m.payload);
  e.block_offsets.resize(m.offsets);
  e.vector_bits.resize(m.bits);
}

}  // namespace

Result<CompressedKvCache> CompressedKvCache::create(const CompressedCacheConfig& config,
                                                    int kv_heads, int head_dim) {
  if (config.block_size < 1 || config.block_size > 65535) {
    return make_error(
        fmt::format("compressed cache: block size {} is not in 1..65535", config.block_size));
  }
  if (config.buffer_size < config.block_size || config.buffer_size % config.block_size != 0) {
    return make_error(fmt::format(
        "compressed cache: buffer size {} is not a positive multiple of the block size {}",
        config.buffer_size, config.block_size));
  }
  if (!(config.rel_scale > 0.0 && config.rel_scale <= 1.0)) {
    return make_error(
        fmt::format("compressed cache: relative scale {} is not in (0, 1]", config.rel_scale));
  }
  if (config.codec == CodecKind::VarWidth) {
    return make_error(
        fmt::format("compressed cache: codec {} is not supported (huffman, rans, bitpack)",
                    codec_id(config.codec)));
  }
  const int w = config.bitpack_width;
  if (w != 0 && w != 2 && w != 4 && w != 8) {
    return make_error(fmt::format("compressed cache: bitpack width {} is not 0, 2, 4 or 8", w));
  }
  if (kv_heads < 1 || head_dim < 1) {
    return make_error(
        fmt::format("compressed cache: shape [{} heads, {} dim] is empty", kv_heads, head_dim));
  }
  CompressedKvCache cache;
  cache.m_config = config;
  cache.m_heads = kv_heads;
  cache.m_dim = head_dim;
  return cache;
}

int CompressedKvCache::buffered_tokens() const {
  const std::size_t row = static_cast<std::size_t>(m_heads) * m_dim;
  return row ? static_cast<int>(m_buffer_keys.size() / row) : 0;
}

Status CompressedKvCache::prefill(const TensorView& keys, const TensorView& values) {
  if (m_prefilled || tokens() != 0) {
    return make_error("compressed cache: prefill given twice or after an append");
  }
  if (keys.heads() != m_heads || keys.dim() != m_dim || values.heads() != m_heads ||
      values.dim() != m_dim || keys.tokens() != values.tokens()) {
    return make_error(fmt::format(
        "compressed cache: prefill keys [{}, {}, {}] and values [{}, {}, {}] do not match the "
        "cache's [*, {}, {}]",
        keys.tokens(), keys.heads(), keys.dim(), values.tokens(), values.heads(), values.dim(),
        m_heads, m_dim));
  }
  const int block = m_config.block_size;
  const int whole = keys.tokens() / block * block;
  if (whole > 0) {
    if (Status st = compress_rows(keys.token_range(0, whole), values.token_range(0, whole)); !st) {
      return st;
    }
  }
  // The tail of a partial block waits in the buffer: compressing it now would fix its key
  // block's statistics before the block is complete (KVComp quantizes whole blocks).
  std::vector<float> row(static_cast<std::size_t>(m_dim));
  for (int t = whole; t < keys.tokens(); ++t) {
    for (int h = 0; h < m_heads; ++h) {
      keys.load_row(t, h, row);
      append_fp16(m_buffer_keys, row.data(), row.size());
      values.load_row(t, h, row);
      append_fp16(m_buffer_values, row.data(), row.size());
    }
  }
  m_prefilled = true;
  return Ok{};
}

void CompressedKvCache::reserve(int tokens) {
  m_reserved = std::max(m_reserved, tokens);
  const detail::GroupSpec spec = kvcomp_spec(m_config);
  const int t = m_reserved;
  m_key_steps.reserve(detail::group_unit_count(spec, TensorRole::Key, t, m_heads, m_dim));
  m_key_mins.reserve(m_key_steps.capacity());
  m_value_steps.reserve(detail::group_unit_count(spec, TensorRole::Value, t, m_heads, m_dim));
  m_value_mins.reserve(m_value_steps.capacity());
  const std::size_t buffered =
      static_cast<std::size_t>(m_config.buffer_size + m_config.block_size) * m_heads * m_dim;
  m_buffer_keys.reserve(buffered);
  m_buffer_values.reserve(buffered);
  if (m_compressed > 0) reserve_streams();
}

// The streams exist from the first compression on: their room is made then.
void CompressedKvCache::reserve_streams() {
  if (m_reserved <= 0) return;
  const std::size_t blocks =
      static_cast<std::size_t>((m_reserved + m_config.block_size - 1) / m_config.block_size) *
      m_heads;
  for (EncodedCodes* codes : {&m_key_codes, &m_value_codes}) {
    codes->payload.reserve(static_cast<std::size_t>(m_reserved) * m_heads * m_dim);
    if (codes->kind == CodecKind::BitPack) continue;  // no offsets or bit counts
    codes->block_offsets.reserve(blocks);
    codes->vector_bits.reserve(static_cast<std::size_t>(m_reserved) * m_heads);
  }
}

Status CompressedKvCache::append(std::span<const float> key_row, std::span<const float> value_row) {
  const std::size_t row = static_cast<std::size_t>(m_heads) * m_dim;
  if (key_row.size() != row || value_row.size() != row) {
    return make_error(fmt::format(
        "compressed cache: append got {} key and {} value floats, a token has {} ({} heads x {})",
        key_row.size(), value_row.size(), row, m_heads, m_dim));
  }
  m_prefilled = true;
  append_fp16(m_buffer_keys, key_row.data(), row);
  append_fp16(m_buffer_values, value_row.data(), row);
  if (buffered_tokens() > m_config.buffer_size) return flush_whole_blocks();
  return Ok{};
}

Status CompressedKvCache::flush_whole_blocks() {
  const int n = buffered_tokens() / m_config.block_size * m_config.block_size;
  if (n == 0) return Ok{};
  const TensorView k = fp16_rows(m_buffer_keys, n, m_heads, m_dim);
  const TensorView v = fp16_rows(m_buffer_values, n, m_heads, m_dim);
  KVLAB_TRY(compress_rows(k, v));
  const std::size_t drop = static_cast<std::size_t>(n) * m_heads * m_dim;
  m_buffer_keys.erase(m_buffer_keys.begin(), m_buffer_keys.begin() + drop);
  m_buffer_values.erase(m_buffer_values.begin(), m_buffer_values.begin() + drop);
  return Ok{};
}

// Quantizes whole blocks of tokens and appends their codes as new codec blocks. The steps and
// minimums are committed only once both encodings succeeded, so a failure leaves the cache as
// it was.
Status CompressedKvCache::compress_rows(const TensorView& keys, const TensorView& values) {
  const int n = keys.tokens();
  const detail::GroupSpec spec = kvcomp_spec(m_config);
  const std::size_t ku = detail::group_unit_count(spec, TensorRole::Key, n, m_heads, m_dim);
  const std::size_t vu = detail::group_unit_count(spec, TensorRole::Value, n, m_heads, m_dim);
  std::vector<std::uint8_t> kc(keys.elements()), vc(values.elements());
  std::vector<float> ks(ku), km(ku), vs(vu), vm(vu);
  detail::quantize_groups(keys, TensorRole::Key, spec, kc.data(), 0, ks.data(), km.data());
  detail::quantize_groups(values, TensorRole::Value, spec, vc.data(), 0, vs.data(), vm.data());

  if (m_compressed == 0) {
    // KVComp Sec. 3.3: one codebook per layer and K/V from the first codes it sees (the
    // prefill), reused for every later block; unseen codes take the escape.
    const bool booked = m_config.codec != CodecKind::BitPack;  // Huffman or rANS
    HuffmanCodebook kb, vb;
    if (booked) {
      const int max_code = m_config.huffman_pairs ? detail::largest_code(spec) : 255;
      const bool rans = m_config.codec == CodecKind::Rans;
      auto k_book = choose_codebook(kc, m_dim, max_code, count_codes(kc), rans);
      if (!k_book) return make_error("compressed cache: key codebook: " + k_book.message());
      auto v_book = choose_codebook(vc, m_dim, max_code, count_codes(vc), rans);
      if (!v_book) return make_error("compressed cache: value codebook: " + v_book.message());
      kb = std::move(*k_book);
      vb = std::move(*v_book);
    }
    const CodecConfig codec{m_config.codec, m_config.block_size, m_config.bitpack_width};
    auto ke = encode_codes(kc, n, m_heads, m_dim, codec, booked ? &kb : nullptr);
    if (!ke) return make_error("compressed cache: keys: " + ke.message());
    CodecConfig vcodec = codec;
    // Keys and values share one width so the packed attention path reads both alike.
    if (!booked) vcodec.bitpack_width = ke->bitpack_width;
    auto ve = encode_codes(vc, n, m_heads, m_dim, vcodec, booked ? &vb : nullptr);
    if (!ve) return make_error("compressed cache: values: " + ve.message());
    m_key_book = std::move(kb);
    m_value_book = std::move(vb);
    m_key_codes = std::move(*ke);
    m_value_codes = std::move(*ve);
    reserve_streams();
  } else {
    const HuffmanCodebook* kb = has_codebooks() ? &m_key_book : nullptr;
    const HuffmanCodebook* vb = has_codebooks() ? &m_value_book : nullptr;
    // If the values fail after the keys went in, the keys' new blocks are cut off again so K
    // and V stay in step (appending only adds bytes at the end, so truncating undoes it).
    const CodesMark mark = mark_of(m_key_codes);
    if (Status st = append_tokens(m_key_codes, kc, n, kb); !st) {
      return make_error("compressed cache: keys: " + st.message());
    }
    if (Status st = append_tokens(m_value_codes, vc, n, vb); !st) {
      truncate_to(m_key_codes, mark);
      return make_error("compressed cache: values: " + st.message());
    }
  }
  m_key_steps.insert(m_key_steps.end(), ks.begin(), ks.end());
  m_key_mins.insert(m_key_mins.end(), km.begin(), km.end());
  m_value_steps.insert(m_value_steps.end(), vs.begin(), vs.end());
  m_value_mins.insert(m_value_mins.end(), vm.begin(), vm.end());
  m_compressed += n;
  return Ok{};
}

CacheMemory CompressedKvCache::memory() const {
  CacheMemory m;
  if (m_compressed > 0) {
    m.payload = m_key_codes.payload_bytes() + m_value_codes.payload_bytes();
    m.metadata = m_key_codes.metadata_bytes() + m_value_codes.metadata_bytes();
  }
  if (has_codebooks()) m.codebooks = 2 * codebook_bytes(m_config.codec);
  m.quant_params =
      (m_key_steps.size() + m_key_mins.size() + m_value_steps.size() + m_value_mins.size()) *
      sizeof(float);
  m.buffer = (m_buffer_keys.size() + m_buffer_values.size()) * sizeof(std::uint16_t);
  return m;
}

CompressedKvView CompressedKvCache::view() const {
  CompressedKvView v;
  v.kv_heads = m_heads;
  v.head_dim = m_dim;
  v.block_size = m_config.block_size;
  v.compressed_tokens = m_compressed;
  v.buffered_tokens = buffered_tokens();
  if (m_compressed > 0) {
    v.keys = &m_key_codes;
    v.values = &m_value_codes;
  }
  if (has_codebooks()) {
    v.key_book = &m_key_book;
    v.value_book = &m_value_book;
  }
  v.key_steps = m_key_steps;
  v.key_mins = m_key_mins;
  v.value_steps = m_value_steps;
  v.value_mins = m_value_mins;
  v.buffer_keys = m_buffer_keys;
  v.buffer_values = m_buffer_values;
  return v;
}

Status CompressedKvCache::dequantize_all(std::span<float> key_rows,
                                         std::span<float> value_rows) const {
  return dequantize_rows(0, tokens(), key_rows, value_rows);
}

Status CompressedKvCache::dequantize_rows(int first, int last, std::span<float> key_rows,
                                          std::span<float> value_rows) const {
  const std::size_t row = static_cast<std::size_t>(m_heads) * m_dim;
  if (first < 0 || first > last || last > tokens() ||
      (first < m_compressed && first % m_config.block_size != 0)) {
    return make_error(fmt::format(
        "compressed cache: tokens {}..{} of {}: the first must start a block of {} where it is "
        "compressed",
        first, last, tokens(), m_config.block_size));
  }
  const std::size_t want = static_cast<std::size_t>(last - first) * row;
  if (key_rows.size() != want || value_rows.size() != want) {
    return make_error(fmt::format(
        "compressed cache: {} tokens x {} floats need {} floats for keys and for values; given {} "
        "and {}",
        last - first, row, want, key_rows.size(), value_rows.size()));
  }
  float* const keys = key_rows.data();
  float* const values = value_rows.data();
  // The compressed blocks of [first, last): decoded to codes, then dequantized. The codes of token
  // `first` sit at index 0, so the index of token 0's first code is -first * row, taken modulo
  // 2^64 by the unsigned arithmetic of dequantize_groups' indices.
  const int coded_last = std::min(last, m_compressed);
  if (first < coded_last) {
    const detail::GroupSpec spec = kvcomp_spec(m_config);
    // Whole blocks are decoded: up to the end of the block `coded_last` falls in.
    const int decoded_last = std::min(m_compressed, (coded_last + m_config.block_size - 1) /
                                                        m_config.block_size * m_config.block_size);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(decoded_last - first) * row);
    const HuffmanCodebook* kb = has_codebooks() ? &m_key_book : nullptr;
    const HuffmanCodebook* vb = has_codebooks() ? &m_value_book : nullptr;
    const std::size_t first_code = std::size_t{0} - static_cast<std::size_t>(first) * row;
    if (Status st = decode_token_range(m_key_codes, kb, first, decoded_last, codes); !st) {
      return make_error("compressed cache: keys: " + st.message());
    }
    detail::dequantize_groups(codes.data(), first_code, m_key_steps.data(), m_key_mins.data(),
                              TensorRole::Key, spec, m_heads, m_dim, first, coded_last, keys);
    if (Status st = decode_token_range(m_value_codes, vb, first, decoded_last, codes); !st) {
      return make_error("compressed cache: values: " + st.message());
    }
    detail::dequantize_groups(codes.data(), first_code, m_value_steps.data(), m_value_mins.data(),
                              TensorRole::Value, spec, m_heads, m_dim, first, coded_last, values);
  }
  // The rest from the fp16 buffer.
  const int buffered_first = std::max(first, m_compressed);
  if (buffered_first < last) {
    const std::size_t from = static_cast<std::size_t>(buffered_first - m_compressed) * row;
    const std::size_t count = static_cast<std::size_t>(last - buffered_first) * row;
    const std::size_t at = static_cast<std::size_t>(buffered_first - first) * row;
    fp16_to_float(std::span<const std::uint16_t>(m_buffer_keys.data() + from, count),
                  std::span<float>(keys + at, count));
    fp16_to_float(std::span<const std::uint16_t>(m_buffer_values.data() + from, count),
                  std::span<float>(values + at, count));
  }
  return Ok{};
}

}  // namespace kvlab
