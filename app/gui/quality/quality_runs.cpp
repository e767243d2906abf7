#include "quality/quality_runs.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "kvlab/store/run_records.h"
#include "quality/quality_configs.h"

namespace kvlab::gui {

namespace {

constexpr const char* kFilePrefix = "file:";
constexpr const char* kSampledPrefix = "sampled:";

std::string resolved(const std::string& path) {
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(std::filesystem::path(path), ec);
  return ec ? path : p.string();
}

std::string resolved_text(const std::string& text) {
  const auto parsed = QualityText::parse(text);
  if (!parsed || parsed->kind != QualityText::Kind::File) return text;
  return kFilePrefix + resolved(parsed->path);
}

bool number(const nlohmann::json& j, const char* key, double& out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  out = it->get<double>();
  return true;
}

}  // namespace

std::string QualityText::describe() const {
  if (kind == Kind::File) return kFilePrefix + path;
  return fmt::format("{}{} tokens, seed {}", kSampledPrefix, tokens, seed);
}

std::optional<QualityText> QualityText::parse(const std::string& text) {
  QualityText t;
  if (text.rfind(kFilePrefix, 0) == 0) {
    t.kind = Kind::File;
    t.path = text.substr(std::string(kFilePrefix).size());
    return t;
  }
  if (text.rfind(kSampledPrefix, 0) != 0) return std::nullopt;
  unsigned long long seed = 0;
  int tokens = 0;
  if (std::sscanf(text.c_str() + std::string(kSampledPrefix).size(), "%d tokens, seed %llu",
                  &tokens, &seed) != 2) {
    return std::nullopt;
  }
  t.tokens = tokens;
  t.seed = seed;
  return t;
}

bool same_model_path(const std::string& a, const std::string& b) {
  return a == b || resolved(a) == resolved(b);
}

bool QualityKey::matches(const QualityKey& other) const {
  const bool same_windows = tokens == other.tokens && windows == other.windows;
  const bool same_length_stopped_early =
      (reached_target_se || other.reached_target_se) && window > 0 && window == other.window;
  return (same_windows || same_length_stopped_early) && same_model_path(model, other.model) &&
         (text == other.text || resolved_text(text) == resolved_text(other.text));
}

std::optional<QualityPoint> quality_point(const RunSummary& run) {
  const nlohmann::json& m = run.metrics;
  if (run.kind != run_kind_id(RunKind::Quality) || !m.is_object()) return std::nullopt;
  QualityPoint p;
  p.run_id = run.id;
  p.created_at = run.created_at;
  p.method = run.method;
  const auto model = m.find("model");
  const auto text = m.find("text");
  if (model == m.end() || !model->is_string() || text == m.end() || !text->is_string()) {
    return std::nullopt;
  }
  p.key.model = model->get<std::string>();
  p.key.text = text->get<std::string>();
  double tokens = 0, windows = 0;
  const bool complete =
      number(m, "tokens", tokens) && number(m, "windows", windows) && number(m, "ratio", p.ratio) &&
      number(m, "bits_per_value", p.bits_per_value) &&
      number(m, "perplexity_exact", p.perplexity_exact) && number(m, "perplexity", p.perplexity) &&
      number(m, "perplexity_change", p.perplexity_change) &&
      number(m, "next_token_agreement", p.next_token_agreement) && number(m, "kl_mean", p.kl_mean);
  if (!complete) return std::nullopt;
  number(m, "kept_fraction", p.kept_fraction);
  number(m, "seconds", p.seconds);
  number(m, "perplexity_change_se", p.perplexity_change_se);
  if (double window = 0; number(m, "window", window)) p.key.window = static_cast<int>(window);
  if (const auto stopped = m.find("reached_target_se");
      stopped != m.end() && stopped->is_boolean()) {
    p.key.reached_target_se = stopped->get<bool>();
  }
  number(m, "kl_mean_se", p.kl_mean_se);
  number(m, "next_token_agreement_low", p.agreement_low);
  number(m, "next_token_agreement_high", p.agreement_high);
  p.key.tokens = static_cast<int>(tokens);
  p.key.windows = static_cast<int>(windows);
  return p;
}

Result<StoredQuality> load_quality_runs(const RunsStore& store, const QualityKey& key) {
  auto runs = store.list_runs(-1);
  if (!runs) return runs.error();
  StoredQuality out;
  std::set<std::string> seen;
  QualityKey wanted = key;
  for (const RunSummary& run : *runs) {  // newest first
    auto point = quality_point(run);
    if (!point) continue;
    if (wanted.tokens == 0 && wanted.windows == 0) {  // the newest matching run's windows
      QualityKey any = point->key;
      any.model = wanted.model;
      any.text = wanted.text;
      if (!point->key.matches(any)) continue;
      wanted.tokens = point->key.tokens;
      wanted.windows = point->key.windows;
      wanted.window = point->key.window;
      wanted.reached_target_se = point->key.reached_target_se;
    }
    if (!point->key.matches(wanted)) continue;
    if (!seen.insert(point->method).second) {
      ++out.older_duplicates;
      continue;
    }
    out.points.push_back(std::move(*point));
  }
  return out;
}

Result<std::optional<QualityKey>> newest_quality_key(const RunsStore& store) {
  auto runs = store.list_runs(-1);
  if (!runs) return runs.error();
  for (const RunSummary& run : *runs) {
    if (auto point = quality_point(run)) return std::optional<QualityKey>(point->key);
  }
  return std::optional<QualityKey>();
}

}  // namespace kvlab::gui
