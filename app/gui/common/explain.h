// What every number the lab shows means and how it is computed, in one or two sentences each,
// for tooltips. A text used by more than one view lives here so the views cannot drift apart;
// each one restates the engine's or planner's own definition (engine/include/kvlab/engine/
// compress.h, metrics.h, eviction.h, model_quality.h, code_codec.h; planners/include/kvlab/
// planners/kv_memory.h, solvers.h; docs/FORMAT.md).
#pragma once

#include <QString>
#include <QStringList>

namespace kvlab::gui::explain {

// Compression runs (the Compression page's results, the Runs page's columns).
QString ratio();
QString bits_per_value();
QString mse();
QString max_abs_error();
QString snr();
QString logit_rmse();
QString softmax_kl();
QString attn_output_rel_error();
QString attn_output_cosine();
QString fp16_formula();
QString measured_formula();
// Entropy coding of KVComp's codes.
QString entropy();
QString payload();
QString codec_metadata();
QString codebook();

// Eviction runs.
QString eviction_policy();
QString eviction_kept();
QString eviction_memory();
QString eviction_memory_ratio();
QString attention_mass_retained();
QString eviction_rel_error();
QString eviction_cosine();
QString needle_retained();
QString needle_in_top_k();

// Quality runs (the Quality page's table and chart axes).
QString quality_run();
QString quality_configuration();
QString quality_ratio();
QString quality_bits();
QString kept_fraction();
QString perplexity();
QString perplexity_change();
QString next_token_agreement();
QString quality_kl();
QString pareto();
QString quality_seconds();

// Planner results, one per column of the Planner page's table, in its order.
QStringList planner_columns();
// What a scheme stores per value: "fp16", "fp8", "int8", "int4", "kivi2", "kivi4" or "run:ID".
QString planner_scheme(const QString& id);
QString planner_memory_chart();
QString planner_context_chart();

// The Runs page's columns, in its order: ID, When, Kind, Source, Method / label, Ratio,
// Bits/value, Attn-out rel. error.
QStringList runs_columns();

}  // namespace kvlab::gui::explain
