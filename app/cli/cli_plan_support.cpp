// Shared parts of the planner commands (see cli_plan_support.h).
#include "cli_plan_support.h"

#include <filesystem>

#include <fmt/format.h>

#include "kvlab/store/plan_inputs.h"
#include "kvlab/store/run_records.h"

namespace kvlab::cli {

using planners::GpuSpec;
using planners::ModelSpec;
using planners::Scheme;

Result<UserCatalogue> user_catalogue(const DbOption& db) {
  UserCatalogue u;
  const auto path = db.path.empty() ? default_db_path() : std::filesystem::path(db.path);
  if (!std::filesystem::exists(path)) return u;
  auto store = db.open_existing();
  if (!store) return store.error();
  auto gpus = store->list_catalog_entries("gpu");
  if (!gpus) return gpus.error();
  for (const auto& j : *gpus) {
    auto g = planners::gpu_from_json(j);
    if (!g) return make_error(fmt::format("{}: stored GPU: {}", path.string(), g.message()));
    u.gpus.push_back(std::move(*g));
  }
  auto models = store->list_catalog_entries("model");
  if (!models) return models.error();
  for (const auto& j : *models) {
    auto m = planners::model_from_json(j);
    if (!m) return make_error(fmt::format("{}: stored model: {}", path.string(), m.message()));
    u.models.push_back(std::move(*m));
  }
  return u;
}

Result<ModelSpec> resolve_model(const std::string& id, const UserCatalogue& user) {
  if (id.size() > 5 && (id.ends_with(".json") || id.ends_with(".gguf"))) {
    return planners::import_model_file(id);
  }
  return planners::find_model(id, user.models);
}

Result<Scheme> resolve_scheme(const std::string& id, const DbOption& db) {
  if (id.rfind("run:", 0) != 0) return planners::parse_scheme(id);
  std::int64_t run_id = 0;
  try {
    std::size_t used = 0;
    run_id = std::stoll(id.substr(4), &used);
    if (used != id.size() - 4) throw std::invalid_argument(id);
  } catch (const std::exception&) {
    return make_error(fmt::format("--scheme '{}': expected run:ID with a number", id));
  }
  auto store = db.open_existing();
  if (!store) return store.error();
  auto run = store->load_run(run_id);
  if (!run) return run.error();
  return run_scheme(*run, id);
}

Result<std::vector<Scheme>> resolve_schemes(const std::string& ids, const DbOption& db) {
  std::vector<Scheme> out;
  for (const auto& id : split(ids)) {
    auto s = resolve_scheme(id, db);
    if (!s) return s.error();
    out.push_back(std::move(*s));
  }
  return out;
}

Result<planners::KernelRates> resolve_rates(const GpuSpec& gpu, const DbOption& db) {
  const auto path = db.path.empty() ? default_db_path() : std::filesystem::path(db.path);
  if (!std::filesystem::exists(path)) return planners::default_kernel_rates();
  auto store = db.open_existing();
  if (!store) return store.error();
  auto rates = stored_kernel_rates(*store, gpu);
  if (!rates) return rates.error();
  return rates->value_or(planners::default_kernel_rates());
}

void DeploymentOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--model", model,
                 "model id, Hugging Face name or alias (see 'kvlab models list'), a Hugging "
                 "Face config.json, or a .gguf file (its shape and its weights' bytes as stored)")
      ->capture_default_str();
  cmd.add_option("--tp", deployment.tp,
                 "tensor parallelism: splits KV heads (replicated when "
                 "TP > kv_heads; an MLA latent is not split)")
      ->capture_default_str();
  cmd.add_option("--pp", deployment.pp, "pipeline parallelism: splits layers")
      ->capture_default_str();
  cmd.add_option("--util", deployment.gpu_memory_utilization,
                 "the serving engine's share of GPU memory (vLLM's gpu_memory_utilization)")
      ->capture_default_str();
  cmd.add_option("--reserve-gib", reserve_gib,
                 "memory per GPU kept for activations and the runtime, GiB")
      ->capture_default_str();
  cmd.add_option("--host-gib", host_gib,
                 "host memory per GPU for KV that a +offload scheme keeps off the GPU, GiB")
      ->capture_default_str();
  cmd.add_option("--page", deployment.page_tokens, "KV allocated in pages of this many tokens")
      ->capture_default_str();
  cmd.add_option("--weights", deployment.weights_dtype,
                 "weights dtype: fp32, fp16, bf16, fp8, int8, int4, fp4 (default: the model's)");
  cmd.add_option("--efficiency", efficiency, "achieved fraction of peak memory bandwidth")
      ->capture_default_str();
  cmd.add_option("--compute-efficiency", compute_efficiency,
                 "achieved fraction of peak dense tensor throughput")
      ->capture_default_str();
  cmd.add_option("--link-efficiency", link_efficiency,
                 "achieved fraction of the host link's bandwidth (offload)")
      ->capture_default_str();
  db.add_to(cmd);
}

Result<planners::Scenario> DeploymentOptions::scenario(const UserCatalogue& user) const {
  planners::Scenario sc;
  auto m = resolve_model(model, user);
  if (!m) return m.error();
  auto g = planners::find_gpu(split(gpu).front(), user.gpus);
  if (!g) return g.error();
  if (!(reserve_gib >= 0 && reserve_gib < 1e6)) {
    return make_error(fmt::format("--reserve-gib {}: must be a non-negative number", reserve_gib));
  }
  if (!(host_gib >= 0 && host_gib < 1e7)) {
    return make_error(fmt::format("--host-gib {}: must be a non-negative number", host_gib));
  }
  sc.model = std::move(*m);
  sc.gpu = std::move(*g);
  sc.deployment = deployment;
  sc.deployment.reserve_bytes = static_cast<std::uint64_t>(reserve_gib * (1ull << 30));
  sc.deployment.host_bytes = static_cast<std::uint64_t>(host_gib * (1ull << 30));
  sc.bandwidth_efficiency = efficiency;
  sc.compute_efficiency = compute_efficiency;
  sc.link_efficiency = link_efficiency;
  auto rates = resolve_rates(sc.gpu, db);
  if (!rates) return rates.error();
  sc.rates = std::move(*rates);
  return sc;
}

template <class T>
Result<std::vector<T>> parse_list(const std::string& text, const char* option) {
  std::vector<T> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(static_cast<T>(v));
    } catch (const std::exception&) {
      return make_error(fmt::format("{} '{}': expected positive whole numbers separated by commas",
                                    option, text));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}
template Result<std::vector<int>> parse_list<int>(const std::string&, const char*);
template Result<std::vector<std::int64_t>> parse_list<std::int64_t>(const std::string&,
                                                                    const char*);

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string millis(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  if (seconds >= 1) return fmt::format("{:.2f} s", seconds);
  if (seconds >= 0.01) return fmt::format("{:.0f} ms", seconds * 1e3);
  return fmt::format("{:.2f} ms", seconds * 1e3);
}

}  // namespace kvlab::cli
