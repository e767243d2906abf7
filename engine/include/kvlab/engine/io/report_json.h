// JSON form of a CompressionReport: the CLI's --json output, and what the runs store keeps so
// every chart can be redrawn later without recomputing.
#pragma once

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/compress.h"

namespace kvlab {

// Keys: source, method, method_label, params, shape, tokens, values, fp16_bytes, ratio,
// bits_per_value, bytes{codes,scales,zero_points,residual,metadata,total}, error{mse, max_abs,
// snr_db, logit_rmse, softmax_kl, attn_output_rel_error, attn_output_cosine}, timings,
// backend{id, device}, and per_layer[] (the same per layer, without histograms).
nlohmann::json report_to_json(const CompressionReport& report);
// Histograms per layer: [{layer, key:[{label,bits,counts}], value:[...]}].
nlohmann::json histograms_to_json(const CompressionReport& report);
// Inverse of the two above (histograms optional); a missing or mistyped key is an error
// naming it.
Result<CompressionReport> report_from_json(const nlohmann::json& report,
                                           const nlohmann::json* histograms = nullptr);

}  // namespace kvlab
