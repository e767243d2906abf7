// GpuLayer: moving compressed layers between the engine's host types and the device, and the
// checks that make every later kernel's reads safe (validate_encoded() before any upload).
#include <cstring>
#include <string>

#include "gpu_layer.cuh"
#include "kvlab/engine/codec/rans_warp.h"
#include "kvlab/kernels/cuda_device.h"

namespace kvlab::cuda {

Status require_gpu() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls report their own
    return make_error(std::string("CUDA: no usable GPU (") + cudaGetErrorString(err) + ")");
  }
  if (count == 0) return make_error("CUDA: no usable GPU (no device found)");
  return Ok{};
}

GpuLayer::GpuLayer() : m(std::make_unique<Impl>()) {}
GpuLayer::GpuLayer(std::unique_ptr<Impl> impl) : m(std::move(impl)) {}
GpuLayer::~GpuLayer() = default;
GpuLayer::GpuLayer(GpuLayer&&) noexcept = default;
GpuLayer& GpuLayer::operator=(GpuLayer&&) noexcept = default;
int GpuLayer::tokens() const {
  return m->tokens;
}
int GpuLayer::kv_heads() const {
  return m->kv_heads;
}
int GpuLayer::head_dim() const {
  return m->head_dim;
}
CodecKind GpuLayer::codec() const {
  return m->codec;
}
std::uint64_t GpuLayer::compressed_bytes() const {
  std::uint64_t b = m->keys.payload_bytes + m->values.payload_bytes + m->keys.metadata_bytes() +
                    m->values.metadata_bytes();
  b += 2 * codebook_bytes(m->codec);
  b += (m->key_steps.size() + m->key_mins.size() + m->value_steps.size() + m->value_mins.size()) *
       sizeof(float);
  return b;
}

static_assert(word_stream::kTableSize == HuffmanCodebook::kTableSize &&
                  word_stream::kEscapeSymbol == HuffmanCodebook::kEscape,
              "word_stream.h's pair table indexes the codebook's decode table");

Status GpuBook::upload(const HuffmanCodebook& book, std::initializer_list<CodecKind> codecs) {
  host = book;
  for (CodecKind kind : codecs) {
    if (kind == CodecKind::Huffman) KVLAB_TRY_STATUS(upload_huffman());
    if (kind == CodecKind::Rans) KVLAB_TRY_STATUS(upload_rans());
  }
  return Ok{};
}

Status GpuBook::upload_huffman() {
  const HuffmanCodebook& book = host;
  if (book.pairs()) {
    return make_error(
        "CUDA: this Huffman codebook codes pairs of codes as one symbol (docs/FORMAT.md, \"Pair "
        "symbols\"); the GPU kernels decode single-code books only: compress for the GPU with "
        "--backend cuda, or keep this cache on the CPU");
  }
  KVLAB_TRY_STATUS(
      decode.upload(book.decode_table(), HuffmanCodebook::kTableSize, "uploading a decode table"));
  std::vector<std::uint32_t> pairs(word_stream::kTableSize);
  word_stream::fill_pair_table(book.decode_table(), pairs.data());
  KVLAB_TRY_STATUS(decode2.upload(pairs.data(), pairs.size(), "uploading a decode table"));
  std::uint32_t bits[256];
  std::uint8_t len[256];
  for (int v = 0; v < 256; ++v) {
    bits[v] = book.enc_bits(static_cast<std::uint8_t>(v));
    len[v] = static_cast<std::uint8_t>(book.cost_bits(static_cast<std::uint8_t>(v)));
  }
  KVLAB_TRY_STATUS(enc_bits.upload(bits, 256, "uploading an encode table"));
  KVLAB_TRY_STATUS(enc_len.upload(len, 256, "uploading an encode table"));
  return Ok{};
}

Status GpuBook::upload_rans() {
  const RansTable* t = host.rans();
  if (t == nullptr) {
    return make_error("CUDA: rANS streams need their codebook's rANS table (a book built with it)");
  }
  rans_escape = t->escape_start();
  rans_pairs = t->pairs();
  std::uint32_t enc[RansTable::kSymbols];
  for (int v = 0; v < RansTable::kSymbols; ++v) {
    enc[v] = rans_warp::encode_entry(t->frequency(v), t->cumulative(v));
  }
  KVLAB_TRY_STATUS(rans_enc.upload(enc, RansTable::kSymbols, "uploading a rANS table"));
  return rans_slots.upload(t->slot_table(), RansTable::kProbScale, "uploading a rANS table");
}

std::uint64_t GpuCodes::metadata_bytes() const {
  if (kind == CodecKind::BitPack) return EncodedCodes::kHeaderBytes;
  return EncodedCodes::kHeaderBytes + 4ull * block_offsets.size() + 2ull * vector_bits.size();
}

Status GpuCodes::upload(const EncodedCodes& e) {
  KVLAB_TRY(validate_encoded(e));
  kind = e.kind;
  tokens = e.tokens;
  heads = e.heads;
  dim = e.dim;
  block_size = e.block_size;
  width = e.bitpack_width;
  payload_bytes = e.payload.size();
  std::vector<std::uint32_t> words(word_stream::payload_words_for(payload_bytes), 0u);
  std::memcpy(words.data(), e.payload.data(), e.payload.size());
  KVLAB_TRY_STATUS(payload.upload(words.data(), words.size(), "uploading a payload"));
  KVLAB_TRY_STATUS(block_offsets.upload(e.block_offsets.data(), e.block_offsets.size(),
                                        "uploading block offsets"));
  KVLAB_TRY_STATUS(
      vector_bits.upload(e.vector_bits.data(), e.vector_bits.size(), "uploading bit counts"));
  return Ok{};
}

Result<EncodedCodes> GpuCodes::download() const {
  EncodedCodes e;
  e.kind = kind;
  e.tokens = tokens;
  e.heads = heads;
  e.dim = dim;
  e.block_size = block_size;
  e.bitpack_width = width;
  std::vector<std::uint32_t> words(word_stream::payload_words_for(payload_bytes));
  KVLAB_TRY_STATUS(payload.download(words.data(), words.size(), "downloading a payload"));
  e.payload.resize(payload_bytes);
  std::memcpy(e.payload.data(), words.data(), payload_bytes);
  e.block_offsets.resize(block_offsets.size());
  KVLAB_TRY_STATUS(block_offsets.download(e.block_offsets.data(), e.block_offsets.size(),
                                          "downloading block offsets"));
  e.vector_bits.resize(vector_bits.size());
  KVLAB_TRY_STATUS(
      vector_bits.download(e.vector_bits.data(), e.vector_bits.size(), "downloading bit counts"));
  return e;
}

Result<GpuLayer> upload_layer(const CompressedKvView& view) {
  KVLAB_TRY_STATUS(require_gpu());
  if (!view.keys || !view.values || view.compressed_tokens == 0) {
    return make_error("upload_layer: the cache has no compressed tokens");
  }
  const EncodedCodes& k = *view.keys;
  const EncodedCodes& v = *view.values;
  if (k.kind != v.kind || k.kind == CodecKind::VarWidth) {
    return make_error(
        "upload_layer: keys and values must both be Huffman, both rANS or both bit-packed");
  }
  if (k.tokens != view.compressed_tokens || v.tokens != k.tokens || k.heads != view.kv_heads ||
      v.heads != k.heads || k.dim != view.head_dim || v.dim != k.dim ||
      k.block_size != view.block_size || v.block_size != k.block_size) {
    return make_error("upload_layer: the streams' shapes disagree with the view");
  }
  const std::size_t key_units = static_cast<std::size_t>(k.token_blocks()) * k.heads * k.dim;
  const std::size_t value_units = static_cast<std::size_t>(k.tokens) * k.heads;
  if (view.key_steps.size() < key_units || view.key_mins.size() < key_units ||
      view.value_steps.size() < value_units || view.value_mins.size() < value_units) {
    return make_error("upload_layer: too few quantization parameters for the tokens");
  }
  if (needs_book(k.kind) && (!view.key_book || !view.value_book)) {
    return make_error(std::string("upload_layer: ") + std::string(codec_id(k.kind)) +
                      " streams need their codebooks");
  }
  auto impl = std::make_unique<GpuLayer::Impl>();
  impl->kv_heads = k.heads;
  impl->head_dim = k.dim;
  impl->block_size = k.block_size;
  impl->tokens = k.tokens;
  impl->codec = k.kind;
  if (Status st = impl->keys.upload(k); !st)
    return make_error("upload_layer: keys: " + st.message());
  if (Status st = impl->values.upload(v); !st) {
    return make_error("upload_layer: values: " + st.message());
  }
  if (needs_book(k.kind)) {
    KVLAB_TRY_STATUS(impl->key_book.upload(*view.key_book, {k.kind}));
    KVLAB_TRY_STATUS(impl->value_book.upload(*view.value_book, {k.kind}));
  }
  KVLAB_TRY_STATUS(impl->key_steps.upload(view.key_steps.data(), key_units, "uploading steps"));
  KVLAB_TRY_STATUS(impl->key_mins.upload(view.key_mins.data(), key_units, "uploading minimums"));
  KVLAB_TRY_STATUS(
      impl->value_steps.upload(view.value_steps.data(), value_units, "uploading steps"));
  KVLAB_TRY_STATUS(
      impl->value_mins.upload(view.value_mins.data(), value_units, "uploading minimums"));
  return GpuLayer(std::move(impl));
}

Result<HostLayer> download_layer(const GpuLayer& layer) {
  const GpuLayer::Impl& g = layer.impl();
  HostLayer h;
  h.kv_heads = g.kv_heads;
  h.head_dim = g.head_dim;
  h.block_size = g.block_size;
  auto k = g.keys.download();
  if (!k) return k.error();
  auto v = g.values.download();
  if (!v) return v.error();
  h.keys = std::move(*k);
  h.values = std::move(*v);
  if (needs_book(g.codec)) {
    h.key_book = g.key_book.host;
    h.value_book = g.value_book.host;
  }
  auto fetch = [](const DeviceArray<float>& d, std::vector<float>& out) -> Status {
    out.resize(d.size());
    return d.download(out.data(), out.size(), "downloading quantization parameters");
  };
  KVLAB_TRY_STATUS(fetch(g.key_steps, h.key_steps));
  KVLAB_TRY_STATUS(fetch(g.key_mins, h.key_mins));
  KVLAB_TRY_STATUS(fetch(g.value_steps, h.value_steps));
  KVLAB_TRY_STATUS(fetch(g.value_mins, h.value_mins));
  return h;
}

CompressedKvView HostLayer::view() const {
  CompressedKvView v;
  v.kv_heads = kv_heads;
  v.head_dim = head_dim;
  v.block_size = block_size;
  v.compressed_tokens = keys.tokens;
  v.keys = &keys;
  v.values = &values;
  if (needs_book(keys.kind)) {
    v.key_book = &key_book;
    v.value_book = &value_book;
  }
  v.key_steps = key_steps;
  v.key_mins = key_mins;
  v.value_steps = value_steps;
  v.value_mins = value_mins;
  return v;
}

}  // namespace kvlab::cuda
