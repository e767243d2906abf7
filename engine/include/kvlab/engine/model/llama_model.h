// A CPU runner for Llama-architecture decoders (RMSNorm, RoPE, SwiGLU, GQA), so kvlab can work
// on the real K, V and queries of a real model. Weights are memory-mapped, never copied.
//
// Today it loads llama2.c checkpoints (the legacy "v0" format: a 7 × int32 header, then fp32
// weights; a negative vocab size means the classifier is not shared with the embedding) and
// their tokenizer (tok*.bin). RoPE comes in two layouts: llama2.c rotates adjacent pairs
// (x[2i], x[2i+1]); Hugging Face checkpoints rotate the two halves (x[i], x[i + d/2]).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvlab/engine/core/aligned.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/model/ggml_types.h"

namespace kvlab {

class KvStore;

// Scaled RoPE, as Hugging Face's config.json names it in "rope_scaling" (transformers'
// modeling_rope_utils): "linear" divides every frequency by `factor` (Chen et al. 2023, position
// interpolation); "llama3" (Llama 3.1 and later) divides only the low frequencies — wavelengths
// longer than original_max_positions / low_freq_factor — by `factor`, keeps the high ones
// (shorter than original_max_positions / high_freq_factor), and blends linearly in between.
struct RopeScaling {
  enum class Kind : std::uint8_t { None, Linear, Llama3 };
  Kind kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int original_max_positions = 8192;                     // llama3
  // Per-pair divisors of the frequencies [head_dim / 2], after `kind` (a GGUF file's rope_freqs
  // tensor: llama.cpp stores Llama 3.1's scaling this way); empty: none.
  std::vector<double> freq_divisors;
};

struct LlamaConfig {
  int dim = 0, hidden_dim = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0, seq_len = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  float norm_eps = 1e-5f;
  bool rope_half_split = false;  // Hugging Face layout; false: llama2.c's adjacent pairs
  bool shared_classifier = true;
  bool qkv_bias = false;  // q, k and v projections add a bias (Qwen2); every layer then has them
  int head_dim() const { return heads > 0 ? dim / heads : 0; }
  int kv_dim() const { return kv_heads * head_dim(); }
};

// A weight matrix [out][in], row-major: floats, or each row a run of GGML blocks (a GGUF model's
// quantized weights). Quantized rows stay quantized in memory: the forward dequantizes them a
// tile of rows at a time inside its matrix products (ggml_types.h), so a 7B Q4 model takes its
// file's 4 GB, not 28 GB of floats.
struct WeightMatrix {
  const void* data = nullptr;
  GgmlType type = GgmlType::F32;
  WeightMatrix() = default;
  WeightMatrix(const float* floats) : data(floats) {}  // NOLINT: implicit, for float loaders
  WeightMatrix(const void* blocks, GgmlType t) : data(blocks), type(t) {}
  explicit operator bool() const { return data != nullptr; }
};

// The weights of one layer, row-major [out][in] as llama2.c, Hugging Face and GGUF store them.
struct LlamaLayerWeights {
  const float* attn_norm = nullptr;  // [dim]
  WeightMatrix wq;                   // [dim][dim]
  WeightMatrix wk;                   // [kv_dim][dim]
  WeightMatrix wv;                   // [kv_dim][dim]
  WeightMatrix wo;                   // [dim][dim]
  const float* bq = nullptr;         // [dim], only with LlamaConfig::qkv_bias
  const float* bk = nullptr;         // [kv_dim], only with LlamaConfig::qkv_bias
  const float* bv = nullptr;         // [kv_dim], only with LlamaConfig::qkv_bias
  const float* ffn_norm = nullptr;   // [dim]
  WeightMatrix w1;                   // gate [hidden][dim]
  WeightMatrix w2;                   // down [dim][hidden]
  WeightMatrix w3;                   // up [hidden][dim]
};

// Every weight of a model: pointers into memory that `owner` keeps alive (a file mapping, or
// converted buffers).
struct LlamaWeights {
  WeightMatrix embedding;  // [vocab][dim]
  std::vector<LlamaLayerWeights> layers;
  const float* final_norm = nullptr;  // [dim]
  WeightMatrix classifier;            // [vocab][dim]
  std::shared_ptr<const void> owner;
};

// The rotation frequency of each pair of a head, radians per position [head_dim / 2]:
// theta^(-2i / head_dim) (Su et al. 2021, RoFormer, eq. 34), then config.rope_scaling applied.
std::vector<double> rope_frequencies(const LlamaConfig& config);
// The model's RoPE over the whole head (rope_frequencies(), its pair layout), tokens at positions
// first_position, first_position + 1, ...
RopeSpec model_rope_spec(const LlamaConfig& config, int first_position = 0);

class LlamaModel {
 public:
  // A llama2.c v0 checkpoint; errors name the file and what does not fit.
  static Result<LlamaModel> load_llama2c(const std::filesystem::path& path);
  // Any other loader: a checked config and its weights; `path` names the model in messages.
  // Builds the RoPE table: cos and sin per position and pair, head_dim floats per position for
  // the first min(seq_len, 32768) positions; a forward past them computes its own rows.
  static Result<LlamaModel> from_weights(std::string path, LlamaConfig config,
                                         LlamaWeights weights);

  LlamaModel(LlamaModel&&) noexcept;
  LlamaModel& operator=(LlamaModel&&) noexcept;
  ~LlamaModel();

  const LlamaConfig& config() const;
  const std::string& path() const;

  // The running state of one sequence: its KV cache (post-RoPE) and, when asked, the queries.
  struct State {
    int pos = 0;
    std::vector<AlignedFloats> keys, values;  // per layer [pos][kv_dim]
    std::vector<AlignedFloats> queries;       // per layer [pos][dim], when kept
    bool keep_queries = false;
    bool keep_pre_rope = false;
    std::vector<AlignedFloats> keys_pre_rope;  // per layer [pos][kv_dim], when kept
    // When set, attention reads what this returns instead of the exact cache: called for each
    // layer after the new tokens' keys and values are appended, with the layer's whole cache
    // ([pos][kv_dim], post-RoPE); it fills keys_read and values_read with the same shape (a
    // quantized cache, dequantized). An error stops the forward.
    std::function<Status(int layer, const AlignedFloats& keys, const AlignedFloats& values,
                         AlignedFloats& keys_read, AlignedFloats& values_read)>
        attention_reader;
    // Eviction in the loop. When set, attention of `layer` through KV head `kv_head` reads only
    // the positions whose entry in the returned mask is nonzero (nullptr: every position), the
    // softmax renormalised over them. Called once per layer and KV head in each forward, after
    // the new tokens are appended; the mask must cover positions 0..pos + n - 1, and must keep
    // at least one of each new token's positions. It composes with attention_reader (the mask
    // selects among what the reader returns).
    std::function<const std::vector<char>*(int layer, int kv_head)> kept_tokens;
    // When set, called for each new token and query head with its attention probabilities over
    // positions 0..probs.size() - 1 (0 where the mask leaves a position out), e.g. for H2O's
    // scores.
    // Within one forward the calls come per KV head, then per token, then per query head of the
    // KV head's group.
    std::function<void(int layer, int q_head, std::span<const float> probs)> observe_attention;
    // When set, it replaces the softmax (and kept_tokens and observe_attention are not used):
    // called for each new token and query head with the scaled scores q·k / sqrt(head_dim) over
    // positions 0..scores.size() - 1, it writes the attention probabilities over them in
    // place (they should sum to 1; 0 where the cache holds nothing). For eviction policies whose
    // entries are not single tokens (merging): an entry's probability goes to its tokens by
    // their weights, so the output is the weighted sum of the merged values.
    std::function<void(int layer, int q_head, std::span<float> scores)> attention_weights;
    // When set, the cache is held in this store's form (a compressed cache, kv_store.h) and not
    // in keys / values, which stay empty: each layer's new keys (after RoPE) and values go to
    // the store, and attention reads it. It does not combine with the hooks above, with kept
    // queries or with pre-RoPE keys (forward() says so).
    std::shared_ptr<KvStore> kv_store;
  };
  State new_state(bool keep_queries = false, bool keep_pre_rope = false) const;

  // Runs `tokens` at positions state.pos.. (one prefill chunk, batched with matrix products)
  // and returns the logits of the last token [vocab]. An error when a token is out of the
  // vocabulary or the positions pass seq_len. Scratch buffers are kept per thread and reused, so
  // decoding one token at a time allocates only as the cache grows; calls on different states
  // may run on different threads at once.
  Result<std::vector<float>> forward(State& state, const std::vector<int>& tokens) const;

 private:
  struct Impl;
  explicit LlamaModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// The llama2.c tokenizer (tok*.bin: int32 max token length, then per token a float score, an
// int32 length and the bytes). Pieces "<0xXX>" stand for raw bytes.
class LlamaTokenizer {
 public:
  static Result<LlamaTokenizer> load_llama2c(const std::filesystem::path& path, int vocab);
  // From pieces and scores by id (a GGUF file's "llama" tokenizer).
  static LlamaTokenizer from_pieces(std::vector<std::string> pieces, std::vector<float> scores);
  // SentencePiece-style BPE as llama2.c does it: a leading space is added, characters are
  // looked up (bytes + 3 as fallback), then the best-scoring pairs are merged.
  std::vector<int> encode(const std::string& text, bool bos, bool eos) const;
  // The text of `token` following `previous` (a leading space is dropped after BOS).
  std::string decode(int previous, int token) const;
  int vocab() const { return static_cast<int>(m_pieces.size()); }
  static constexpr int kBos = 1, kEos = 2;

 private:
  std::vector<std::string> m_pieces;
  std::vector<float> m_scores;
};

// One kind of matrix product in a forward: `count` times [rows × depth] · [depth × cols], the
// right-hand side stored as [cols][depth] (a weight matrix, or the keys) when rhs_transposed.
struct MatmulShape {
  int rows = 0, depth = 0, cols = 0, count = 0;
  bool rhs_transposed = true;
  double flops() const { return 2.0 * rows * depth * cols * count; }
};
// Every matrix product LlamaModel::forward performs for `n` tokens at positions pos.., in this
// order: the weight shapes (q and o, k and v, then gate and up and down for each pass of the
// feed-forward over at most 1024 rows: four shapes up to 1024 tokens), then per causal block of
// new tokens attention's scores and weighted values (per layer and KV head), then the classifier
// for the last token. Benchmarks time Eigen GEMMs of exactly these shapes beside the runner.
std::vector<MatmulShape> forward_matmul_shapes(const LlamaConfig& config, int pos, int n);

// The cache the model built for `state`, as a KvCache the rest of kvlab reads: K, V per layer
// [tokens, kv_heads, head_dim] in f32, and the queries [tokens, heads, head_dim] when kept.
KvCache state_to_cache(const LlamaModel& model, const LlamaModel::State& state, bool pre_rope);

}  // namespace kvlab
