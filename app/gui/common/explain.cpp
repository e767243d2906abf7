#include "common/explain.h"

#include <QObject>

namespace kvlab::gui::explain {

// compress.h: ratio = fp16_bytes / bytes.total(); ByteBreakdown counts codes, scales,
// zero-points, residual (fp16 windows) and metadata (headers, tier bounds, codec offsets, bit
// counts, codebooks).
QString ratio() {
  return QObject::tr(
      "Compression ratio: the cache's bytes in fp16 ÷ its compressed bytes, every stored byte "
      "counted: codes, scales, zero-points, the fp16 recent window and metadata (headers, tier "
      "bounds, codec offsets and bit counts, Huffman codebooks).");
}

QString bits_per_value() {
  return QObject::tr(
      "Compressed bits per K or V element: 8 × compressed bytes ÷ number of values, so scales, "
      "zero-points, the fp16 window and metadata are included (fp16 is 16; ratio = 16 ÷ "
      "bits/value).");
}

// metrics.h, ElementErrorSums and AttentionErrorSums.
QString mse() {
  return QObject::tr(
      "Mean squared error of the reconstruction: Σ (x − x̂)² ÷ number of values, over every K "
      "and V element of every layer.");
}

QString max_abs_error() {
  return QObject::tr("Largest absolute error |x − x̂| of any K or V element in the cache.");
}

QString snr() {
  return QObject::tr(
      "Signal-to-noise ratio of the reconstruction: 10 · log10(Σ x² ÷ Σ (x − x̂)²) over every K "
      "and V element, in dB; higher is better (999 dB: exact).");
}

QString logit_rmse() {
  return QObject::tr(
      "Root-mean-square error of the attention logits q·k/√d over every (query, head, token): "
      "the cache's decode-time queries against the original and the reconstructed keys (0 when "
      "the cache has no queries).");
}

QString softmax_kl() {
  return QObject::tr(
      "KL(p ‖ p̂) in nats between the attention weights over the original keys (p) and over the "
      "reconstructed keys (p̂), mean over (query, head) pairs.");
}

QString attn_output_rel_error() {
  return QObject::tr(
      "Relative error of the attention output o = softmax(q·Kᵀ/√d)·V: √(Σ |o − ô|² ÷ Σ |o|²) "
      "over every query and head, ô computed from the reconstructed K and V.");
}

QString attn_output_cosine() {
  return QObject::tr(
      "Cosine similarity of the attention outputs o and ô (original vs reconstructed K and V), "
      "mean over (query, head) pairs; 1: same direction.");
}

// planners/memory_formula.h, explain_kv_bytes().
QString fp16_formula() {
  return QObject::tr(
      "The cache in fp16: 2 (K and V) × layers × kv_heads × head_dim × tokens × 2 bytes.");
}

QString measured_formula() {
  return QObject::tr(
      "The same formula at the measured bits per value ÷ 8 bytes per value, so scales, the fp16 "
      "window and metadata are in it.");
}

// code_codec.h and docs/FORMAT.md ("Sizes").
QString entropy() {
  return QObject::tr(
      "Order-0 Shannon entropy of the quantized codes, −Σ p·log2 p bits per code (code-weighted "
      "mean over the K and V streams): the least any coder that codes one code at a time can "
      "spend.");
}

QString payload() {
  return QObject::tr(
      "Coded bits per code: 8 × payload bytes ÷ codes. The payload is the bit streams with each "
      "block's padding (and VarWidth's 4-bit group headers, rANS's 32 lane states a block); "
      "offsets, bit counts, the codec header and the codebook are not in it.");
}

QString codec_metadata() {
  return QObject::tr(
      "What lets any block and vector decode on its own (docs/FORMAT.md): a 4-byte codec header "
      "per tensor, a u32 byte offset per block and a u16 bit count per vector; rANS keeps the "
      "offsets but no bit counts (a vector decodes with its block), bitpack only the header.");
}

QString codebook() {
  return QObject::tr(
      "The serialized tables a codec shares, one per layer for K and one for V: a Huffman book's "
      "257 code lengths of 4 bits (129 bytes), or rANS's 257 frequencies of 12 bits (386 bytes); "
      "0 for bitpack and varwidth.");
}

// eviction.h: EvictionStep, EvictionLayerResult, EvictionReport.
QString eviction_policy() {
  return QObject::tr("The policy and its budget, with the options the run used.");
}

QString eviction_kept() {
  return QObject::tr(
      "Entries a KV head still holds at the last decode step, mean over KV heads (and layers), "
      "of the tokens the sequence has by then; a merged entry counts once.");
}

QString eviction_memory() {
  return QObject::tr(
      "KV memory of the kept entries at the last step (fp16, or with Quantize kept the method's "
      "measured bytes per token of each layer), beside the full cache of every token in fp16.");
}

QString eviction_memory_ratio() {
  return QObject::tr(
      "Memory ratio: the full cache in fp16 ÷ the memory of the kept entries, at the last step "
      "(eviction and, with Quantize kept, quantization together).");
}

QString attention_mass_retained() {
  return QObject::tr(
      "Of the attention the full cache gives, the share that falls on tokens still held, mean "
      "over decode steps and query heads (100 %: nothing attended was evicted).");
}

QString eviction_rel_error() {
  return QObject::tr(
      "√(Σ |o − ô|² ÷ Σ |o|²): the attention output ô over the kept entries (softmax "
      "renormalised over them) against o over the full cache, pooled over steps and query "
      "heads.");
}

QString eviction_cosine() {
  return QObject::tr(
      "Cosine similarity of the attention output over the kept entries to the full cache's, "
      "mean over decode steps and query heads.");
}

QString needle_retained() {
  return QObject::tr(
      "Share of KV heads that still hold the planted needle token as its own entry at the last "
      "step (synthetic sources only).");
}

QString needle_in_top_k() {
  return QObject::tr(
      "Share of KV heads where the needle is still held and among the top-k attended entries "
      "for every query head of the group at the last step.");
}

// model_quality.h: QualityReport; quality_runs.h: QualityPoint::memory_ratio() and
// memory_bits_per_value().
QString quality_run() {
  return QObject::tr("The run's number in the runs database.");
}

QString quality_configuration() {
  return QObject::tr(
      "The configuration measured: a quantization method (attention reads the dequantized cache) "
      "or an eviction policy (attention reads only the kept tokens); hover a cell for its full "
      "label.");
}

QString quality_ratio() {
  return QObject::tr(
      "Memory ratio vs fp16: the method's compression ratio measured on the exact run's cache "
      "(metadata included), divided by the mean kept fraction when a policy evicts (eviction "
      "alone: 1 ÷ kept fraction).");
}

QString quality_bits() {
  return QObject::tr(
      "Bits per value held: the method's measured bits per value (16 without one) × the mean "
      "kept fraction.");
}

QString kept_fraction() {
  return QObject::tr(
      "Kept tokens ÷ tokens so far after each step, mean over steps, windows, layers and KV "
      "heads; 100 % without eviction.");
}

QString perplexity() {
  return QObject::tr(
      "exp(mean negative log-likelihood of each next token of the text): the exact run → the run "
      "with attention reading the compressed or evicted cache.");
}

QString perplexity_change() {
  return QObject::tr(
      "Perplexity ÷ exact perplexity − 1: how much worse the model predicts the text with the "
      "cache compressed or evicted.");
}

QString next_token_agreement() {
  return QObject::tr(
      "Share of positions where the greedy next token (the argmax) is the same with the "
      "compressed or evicted cache as with the exact one.");
}

QString quality_kl() {
  return QObject::tr(
      "Mean KL(exact ‖ compressed) of the next-token distributions, in nats, over every "
      "predicted token.");
}

QString pareto() {
  return QObject::tr(
      "✓: on the Pareto frontier of the chart's two axes: no other configuration is at least as "
      "good on both and better on one.");
}

QString quality_seconds() {
  return QObject::tr("Wall-clock time of the measurement: the exact and the compressed run.");
}

// solvers.h: PlanResult and plan(); kv_memory.h: what is counted.
QStringList planner_columns() {
  // In PlannerColumn order; "per GPU" is one GPU of the most loaded pipeline stage.
  return {
      QObject::tr("The storage scheme: fp16, fp8, int8, int4, KIVI, KVComp, or a compression "
                  "run's measured bits per value; with the eviction budget when one is chosen."),
      QObject::tr("Yes when the batch's KV fits the KV capacity: GPU memory × memory use − "
                  "weights on the GPU − reserve."),
      QObject::tr("Time per output token: one decode step of the whole batch = PP × (max(weights "
                  "read, dense compute) + max(KV read, attention compute, decompression, host "
                  "link)); decompression is the scheme's fused attention kernel, arithmetic "
                  "included."),
      QObject::tr("Decode tokens per second one user (one sequence) sees: 1 ÷ TPOT."),
      QObject::tr("Decode tokens per second of the deployment divided by its TP × PP GPUs: "
                  "batch ÷ TPOT ÷ GPUs, to compare deployments of different sizes."),
      QObject::tr("Time to first token of one prompt of this context, alone on the deployment: "
                  "the slower of its FLOPs ÷ (peak × compute efficiency) and its bytes ÷ "
                  "(bandwidth × efficiency), plus compressing the new KV."),
      QObject::tr("Most sequences at this context: ⌊KV capacity ÷ KV per sequence⌋."),
      QObject::tr("Longest context (up to the model's limit) at which the whole batch's KV still "
                  "fits the KV capacity; 0 when not even one token fits."),
      QObject::tr("Fewest GPUs that fit this batch and context: one node of 1, 2, 4 or 8 with "
                  "tensor parallelism, then 2 to 8 nodes of 8 with pipeline parallelism."),
      QObject::tr("KV bytes of one sequence at the context on the most loaded GPU: its pipeline "
                  "stage's layers, kv_heads ÷ TP heads, sliding windows and eviction applied, "
                  "rounded up to whole KV pages."),
      QObject::tr("KV per sequence × batch, on that one GPU: what must fit its KV capacity."),
      QObject::tr("The batch's KV on all TP × PP GPUs together (KV per GPU × GPUs; KV heads "
                  "replicated when TP > kv_heads count every copy)."),
      QObject::tr("KV bytes per token of the whole model, as if on one GPU: 2 × layers × kv_heads "
                  "× head_dim × bytes per value (scales and fp16 window included); no pages, "
                  "window, eviction or parallelism."),
      QObject::tr("Decode tokens per second of the whole deployment, all users together: batch "
                  "÷ TPOT."),
      QObject::tr("What the decode step waits on most (weights read, dense compute, KV read, "
                  "attention compute, decompression or host link), and whether its compute "
                  "outweighs its memory traffic."),
  };
}

// kv_memory.h, "the scheme's bytes".
QString planner_scheme(const QString& id) {
  if (id == QLatin1String("fp16")) return QObject::tr("fp16: 2 bytes per value, nothing else");
  if (id == QLatin1String("fp8") || id == QLatin1String("int8")) {
    return QObject::tr("%1: 1 byte per value plus one float scale per tensor").arg(id);
  }
  if (id == QLatin1String("int4")) {
    return QObject::tr("int4: half a byte per value plus one float scale per tensor");
  }
  if (id == QLatin1String("kvcomp")) {
    return QObject::tr(
        "KVComp: Huffman-coded quantized KV at 5.03 bits per value as kvlab bench gpu measured "
        "it on an H100 (every stream byte, bit count and block offset); decoding its streams "
        "is slower than reading fp16 on most GPUs");
  }
  if (id.startsWith(QLatin1String("kivi"))) {
    return QObject::tr(
               "KIVI %1-bit as the engine's quantizer allocates it: codes, a float scale and "
               "minimum per group of 32, the newest 128 tokens in fp16, a 28-byte header per "
               "tensor")
        .arg(id.mid(4));
  }
  return QObject::tr(
             "The bits per value measured by compression %1, every stored byte counted "
             "(scales, fp16 window, metadata)")
      .arg(id.startsWith(QLatin1String("run:")) ? QObject::tr("run #%1").arg(id.mid(4)) : id);
}

QString planner_memory_chart() {
  return QObject::tr(
      "One GPU's memory per scheme, stacked: weights, reserve, the batch's KV (red where it does "
      "not fit) and what is free; the dashed line is the usable memory (memory × memory use).");
}

QString planner_context_chart() {
  return QObject::tr(
      "The batch's KV on one GPU as the context grows, per scheme, against the KV capacity "
      "(usable memory − weights − reserve).");
}

QStringList runs_columns() {
  // In RunsTableModel::Column order.
  return {
      QObject::tr("The run's number in the runs database (run:ID names it to the planner)."),
      QObject::tr("When the run was saved, in local time."),
      QObject::tr("What made the run: compression, eviction, quality, plan or stream."),
      QObject::tr("What it ran on: a synthetic preset, a cache file, a model capture, or the "
                  "model (quality and plan runs)."),
      QObject::tr("Tokens: the cache's length (compression, eviction, stream), the window the "
                  "model read (quality) or the planned context (plan)."),
      QObject::tr("The method or policy id and its label with the parameters."),
      QObject::tr("Memory against fp16. Compression: the cache's fp16 bytes ÷ compressed bytes, "
                  "metadata included. Eviction: the full fp16 cache ÷ the kept memory at the "
                  "last step. Quality: the method's ratio ÷ the fraction of tokens kept."),
      QObject::tr("8 × stored bytes ÷ number of K and V values, scales, fp16 window and "
                  "metadata included, eviction counted."),
      QObject::tr("√(Σ |o − ô|² ÷ Σ |o|²) of the attention output, against the original cache "
                  "(compression) or the full cache (eviction). Quality runs measure the model "
                  "instead: see Δ perplexity and KL."),
      QObject::tr("Quality runs: perplexity with the compressed cache ÷ with the exact one, − 1."),
      QObject::tr("Quality runs: mean KL(exact ‖ compressed) of the next-token distribution, in "
                  "nats."),
      QObject::tr("Eviction runs: the fraction of KV heads that kept the planted needle."),
      QObject::tr("Your tags (Tags & note…); searched with the note."),
  };
}

}  // namespace kvlab::gui::explain
