// A KV cache held by the runner in a method's stored form (issue 47): LlamaModel::State::kv_store.
// The runner hands each layer's new keys (after RoPE) and values to the store instead of keeping
// floats, and its attention reads the store: the bytes a decode step reads are the bytes the
// method keeps, and the memory held is the store's real allocations.
//
// The KVComp store keeps each layer as a CompressedKvCache (codec/compressed_cache.h, KVComp's
// streaming cache: the prompt quantized and entropy-coded at prefill, later tokens in an fp16
// buffer flushed a block at a time) and attends with the fused kernels that decode the streams
// inside the dot products (attention/fused_attention.h). As the KVComp paper's engine does, the
// prompt's own attention reads the exact keys and values of the prompt; they are compressed right
// after, and every later token reads the compressed cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/row_attention.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {

struct LlamaConfig;

class KvStore {
 public:
  virtual ~KvStore();
  // The n new tokens of `layer` at positions pos..pos + n - 1: their keys (after RoPE) and values
  // [n][kv_heads * head_dim] are stored, and out [n][heads * head_dim] receives each one's causal
  // attention softmax(q . k / sqrt(head_dim)) . v over every stored position up to its own, from
  // q [n][heads * head_dim] (after RoPE). Positions arrive in order, each layer once per forward.
  // The store may write over `keys` and `values` (a prompt's rows rotated, or read back from the
  // cache for its own attention) rather than copy them: a long prompt takes no second copy.
  // A prompt may come in chunks (llama.cpp's micro-batches): a later chunk (pos > 0, n > 1)
  // attends over the cache read a tile at a time, with its own rows as the method's prompt reads
  // them (exact where the method's prompt reads itself exact, else as stored).
  virtual Status append_and_attend(int layer, int pos, int n, const float* q, float* keys,
                                   float* values, float* out) = 0;
  // Stores the n new tokens as append_and_attend does, without their attention: a context
  // filled for a benchmark's decode steps. The same rules and errors.
  virtual Status append(int layer, int pos, int n, float* keys, float* values) = 0;
  // Bytes the store holds now, every component counted (codes, metadata, codebooks, parameters,
  // buffers), from what it allocated.
  virtual std::uint64_t bytes() const = 0;
  // The same tokens as fp16 keys and values.
  virtual std::uint64_t fp16_bytes() const = 0;
  // "kvcomp B=64 rel=0.05 + huffman", as method labels read.
  virtual std::string label() const = 0;
  // Where a decode step's attention runs: "cpu", or the RowAttention's name ("cuda (NVIDIA H200)")
  // for a store given one (make_method_store's `decode`), and the bytes of that one's copy of the
  // rows (on a GPU, device memory; bytes() stays the store's own).
  virtual std::string decode_attention() const { return "cpu"; }
  virtual std::uint64_t decode_copy_bytes() const { return 0; }
  // Every stored token of `layer` reconstructed ([tokens][kv_heads * head_dim] each): what the
  // attention reads, for references and tests.
  virtual Status dequantize_layer(int layer, std::span<float> keys,
                                  std::span<float> values) const = 0;
  virtual int tokens(int layer) const = 0;

 protected:
  // The checks every store makes of append_and_attend's arguments: `layer` one of `layers`, a
  // positive `n`, and new tokens starting at `stored`, the count the layer holds.
  static Status check_append(int layer, int layers, int pos, int n, int stored);
};

// The KVComp store for a model of this shape; `max_tokens` (0: none) makes room for that many
// tokens up front (CompressedKvCache::reserve). Errors name what the configuration gets wrong.
Result<std::unique_ptr<KvStore>> make_kvcomp_store(const LlamaConfig& model,
                                                   const CompressedCacheConfig& config,
                                                   int max_tokens = 0);

// The store of `method` as its reference engine keeps a cache it appends to
// (kv_method_store.cpp): llama.cpp's block types (each token's row quantized as it is written,
// attn_rot included, attention reading the quantized row from the prompt on), KIVI (keys in
// fp16 until R have gathered, then quantized per channel in groups of G; values kept fp16 for
// the newest R tokens, the older quantized per token), INT8 / INT4 per tensor, FP8 and NVFP4
// (per-tensor scales fixed from the prompt, every later token encoded with them, as a serving
// engine with calibrated scales does), MXFP4. Attention reads the stored codes in place, each
// lane group decoded inside the key and value loops (or, on builds without AVX2 and head sizes
// not a multiple of 16, a tile of tokens at a time into a scratch buffer), never the whole
// layer. `max_tokens` (0: none) reserves the
// allocations up front, as llama.cpp allocates its context. KVComp goes to make_kvcomp_store
// with `kvcomp` (its codec huffman unless bitpack is chosen); tiered, KVQuant and TurboQuant are
// an error naming them.
// `decode` (row_attention.h; null: none): each decode step's attention runs there, over the rows
// handed to it as they are stored; the prompt and a prompt's later chunks attend on the CPU. A
// method whose stored rows no row kernel reads (KVComp, KIVI, INT8/INT4, FP8 E5M2, llama.cpp's
// other block types, MXFP4) is then an error saying so.
Result<std::unique_ptr<KvStore>> make_method_store(const LlamaConfig& model,
                                                   const MethodConfig& method, int max_tokens = 0,
                                                   const CompressedCacheConfig& kvcomp = {},
                                                   std::unique_ptr<RowAttention> decode = nullptr);

// The fp16 cache a serving engine holds, stored and attended by the same code as
// make_method_store's methods (each token's row rounded to fp16 as written, the prompt's
// attention reading it back): the baseline their speed and memory are measured against.
Result<std::unique_ptr<KvStore>> make_fp16_store(const LlamaConfig& model, int max_tokens = 0,
                                                 std::unique_ptr<RowAttention> decode = nullptr);

// The shape of a RowAttention for this model's stores.
RowAttentionShape row_attention_shape(const LlamaConfig& model, int max_tokens);

// The store of `method` (empty: the fp16 store) whose decode steps attend on backend `backend`
// (make_backend's names): "cpu", the store's own attention; "cuda", the GPU's RowAttention
// (Backend::decode_attention), an Error where there is no usable GPU, the model's heads are no
// shape its kernel serves, or no row kernel reads the method's rows; "auto", the GPU where it can
// and the CPU otherwise. The store says where it attends (KvStore::decode_attention).
Result<std::unique_ptr<KvStore>> make_store_on(std::string_view backend, const LlamaConfig& model,
                                               const std::optional<MethodConfig>& method,
                                               int max_tokens = 0,
                                               const CompressedCacheConfig& kvcomp = {});

}  // namespace kvlab
