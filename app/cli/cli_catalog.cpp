// kvlab models and kvlab gpus: the planner's catalogues on the command line.
#include <fmt/format.h>

#include "cli_plan_support.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/hf_model.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab::cli {

using planners::GpuSpec;
using planners::ModelSpec;
using planners::Scheme;

void add_models_convert_command(CLI::App& models);

void add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "models", "The model catalogue: list, import a config.json, convert a llama2.c checkpoint");
  cmd->require_subcommand(1);
  auto db = std::make_shared<DbOption>();
  auto* list = cmd->add_subcommand("list", "Built-in and imported models");
  db->add_to(*list);
  list->callback([db] {
    exit_code() = [&]() -> int {
      auto user = user_catalogue(*db);
      if (!user) return fail(user.message());
      fmt::print("{:<20} {:>6} {:>7} {:>8} {:>8} {:>9} {:>14}  {}\n", "id", "layers", "q_heads",
                 "kv_heads", "head_dim", "params B", "KV B/token", "notes");
      std::vector<ModelSpec> all = planners::builtin_models();
      all.insert(all.end(), user->models.begin(), user->models.end());
      const Scheme fp16 = planners::parse_scheme("fp16").value();
      for (const auto& m : all) {
        std::string notes;
        if (m.is_mla())
          notes += fmt::format("MLA latent {}+{}; ", m.kv_lora_rank, m.qk_rope_head_dim);
        if (m.sliding_window) {
          notes += fmt::format("window {} on {} layers; ", *m.sliding_window,
                               m.layers_of(planners::LayerKind::Sliding));
        }
        if (m.chunk_size > 0) {
          notes += fmt::format("chunks of {} on {} layers; ", m.chunk_size,
                               m.layers_of(planners::LayerKind::Chunked));
        }
        if (m.layers_of(planners::LayerKind::Linear) > 0) {
          notes += fmt::format("{} linear-attention layers (no KV); ",
                               m.layers_of(planners::LayerKind::Linear));
        }
        if (m.is_moe()) notes += fmt::format("MoE, {:g}B active; ", m.active_params());
        if (m.attention_sinks) notes += "attention sinks; ";
        fmt::print("{:<20} {:>6} {:>7} {:>8} {:>8} {:>9.1f} {:>14.0f}  {}\n", m.id, m.layers,
                   m.q_heads, m.is_mla() ? 0 : m.kv_heads, m.head_dim, m.params_billion,
                   planners::kv_bytes_per_token(m, fp16), notes);
      }
      return 0;
    }();
  });
  add_models_convert_command(*cmd);
  auto path = std::make_shared<std::string>();
  auto save = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto* imp = cmd->add_subcommand(
      "import",
      "Read a Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2, Gemma2, "
      "DeepSeek-V2/V3) or a .gguf file (llama, qwen2) and show, or with --save store, the model "
      "it describes");
  imp->add_option("config", *path, "path to config.json or a .gguf file")->required();
  imp->add_flag("--save", *save, "store it in the runs database, for --model ID later");
  imp->add_flag("--json", *json, "print the catalogue entry as JSON");
  db->add_to(*imp);
  imp->callback([=] {
    exit_code() = [&]() -> int {
      auto m = planners::import_model_file(*path);
      if (!m) return fail(m.message());
      if (*save) {
        auto store = db->open_for_saving();
        if (!store) return fail(store.message());
        if (auto s = store->save_catalog_entry("model", m->id, planners::model_to_json(*m)); !s) {
          return fail(s.message());
        }
      }
      if (*json) {
        fmt::print("{}\n", json_text(planners::model_to_json(*m), 2));
      } else {
        const Scheme fp16 = planners::parse_scheme("fp16").value();
        fmt::print(
            "{}: {} layers, {} query heads, {} KV heads × {} head_dim{}{}, ~{:.2f}B "
            "params ({}), max context {}; fp16 KV {:.0f} bytes per token{}\n",
            terminal_text(m->id), m->layers, m->q_heads, m->kv_heads, m->head_dim,
            m->is_mla() ? fmt::format(" (MLA latent {}+{})", m->kv_lora_rank, m->qk_rope_head_dim)
                        : "",
            m->sliding_window ? fmt::format(", sliding window {}", *m->sliding_window) : "",
            m->params_billion,
            m->weights_bytes > 0
                ? fmt::format("{:.1f} MB as stored", static_cast<double>(m->weights_bytes) / 1e6)
                : m->weights_dtype,
            m->max_context, planners::kv_bytes_per_token(*m, fp16), *save ? "; saved" : "");
      }
      return 0;
    }();
  });
}

void add_models_convert_command(CLI::App& models) {
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("f32");
  auto* cmd =
      models.add_subcommand("convert-llama2c",
                            "Write a llama2.c checkpoint as a Hugging Face folder (config.json, "
                            "model.safetensors), with the query/key rows permuted for the HF RoPE");
  cmd->add_option("checkpoint", *in, "llama2.c checkpoint (.bin)")->required();
  cmd->add_option("out_dir", *out, "the folder to write")->required();
  cmd->add_option("--dtype", *dtype, "weights dtype: f32, f16 or bf16")->capture_default_str();
  cmd->callback([=] {
    exit_code() = [&]() -> int {
      const auto d = parse_dtype(*dtype);
      if (!d) return fail(fmt::format("--dtype {}: expected f32, f16 or bf16", *dtype));
      if (auto s = convert_llama2c_to_hf(*in, *out, *d); !s) return fail(s.message());
      fmt::print("wrote {}/config.json and {}/model.safetensors\n", *out, *out);
      return 0;
    }();
  });
}

void add_gpus_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("gpus", "The GPU catalogue: list, add your own, remove");
  cmd->require_subcommand(1);
  auto db = std::make_shared<DbOption>();
  auto* list = cmd->add_subcommand("list", "Built-in GPUs and your own");
  db->add_to(*list);
  list->callback([db] {
    exit_code() = [&]() -> int {
      auto user = user_catalogue(*db);
      if (!user) return fail(user.message());
      fmt::print("{:<14} {:>10} {:>7} {:>8} {:>8} {:>8} {:>6} {:>8}  {:<36} {}\n", "id", "memory",
                 "GB/s", "bf16 TF", "fp8 TF", "fp4 TF", "fp32", "link GB/s", "name", "source");
      std::vector<GpuSpec> all = planners::builtin_gpus();
      all.insert(all.end(), user->gpus.begin(), user->gpus.end());
      const auto tf = [](double v) { return v > 0 ? fmt::format("{:g}", v) : std::string("-"); };
      for (const auto& g : all) {
        fmt::print("{:<14} {:>10} {:>7.0f} {:>8} {:>8} {:>8} {:>6} {:>8}  {:<36} {}\n", g.id,
                   planners::format_bytes(static_cast<double>(g.memory_bytes)), g.bandwidth_gbs,
                   tf(g.tflops.bf16), tf(g.tflops.fp8), tf(g.tflops.fp4), tf(g.tflops.fp32),
                   tf(g.host_link_gbs), g.name, g.user ? "yours" : g.source);
      }
      return 0;
    }();
  });
  auto g = std::make_shared<GpuSpec>();
  auto gib = std::make_shared<double>(0);
  auto* add = cmd->add_subcommand("add", "Store your own GPU for --gpu ID");
  add->add_option("--id", g->id, "its id")->required();
  add->add_option("--name", g->name, "its name");
  add->add_option("--memory-gib", *gib, "device memory in GiB (as nvidia-smi reports it)")
      ->required();
  add->add_option("--bandwidth", g->bandwidth_gbs, "peak memory bandwidth in GB/s")->required();
  add->add_option("--bf16-tflops", g->tflops.bf16,
                  "dense BF16 tensor throughput, TFLOPS (for time to first token and compute-bound "
                  "steps; without it only memory is charged)");
  add->add_option("--fp8-tflops", g->tflops.fp8, "dense FP8 tensor throughput, TFLOPS");
  add->add_option("--fp32-tflops", g->tflops.fp32,
                  "FP32 (non-tensor) throughput, TFLOPS: scales the decompression rates");
  add->add_option("--host-link-gbs", g->host_link_gbs,
                  "host link bandwidth one way, GB/s (PCIe 5.0 x16: 64), for +offload");
  add->add_option("--source", g->source, "where the numbers come from");
  db->add_to(*add);
  add->callback([=] {
    exit_code() = [&]() -> int {
      GpuSpec spec = *g;
      if (!(*gib > 0 && *gib < 1e6))
        return fail(fmt::format("--memory-gib {}: must be positive", *gib));
      spec.memory_bytes = static_cast<std::uint64_t>(*gib * (1ull << 30));
      spec.memory_stated = fmt::format("{:g} GiB (given by the user)", *gib);
      spec.user = true;
      if (spec.name.empty()) spec.name = spec.id;
      if (auto v = spec.validate(); !v) return fail(v.message());
      for (const auto& b : planners::builtin_gpus()) {
        if (b.id == spec.id)
          return fail(fmt::format("--id {}: a built-in GPU has that id", spec.id));
      }
      auto store = db->open_for_saving();
      if (!store) return fail(store.message());
      if (auto s = store->save_catalog_entry("gpu", spec.id, planners::gpu_to_json(spec)); !s) {
        return fail(s.message());
      }
      fmt::print("saved GPU '{}' ({}, {:g} GB/s)\n", spec.id,
                 planners::format_bytes(static_cast<double>(spec.memory_bytes)),
                 spec.bandwidth_gbs);
      return 0;
    }();
  });
  auto id = std::make_shared<std::string>();
  auto* rm = cmd->add_subcommand("remove", "Delete one of your own GPUs");
  rm->add_option("id", *id, "its id")->required();
  db->add_to(*rm);
  rm->callback([=] {
    exit_code() = [&]() -> int {
      auto store = db->open_existing();
      if (!store) return fail(store.message());
      if (auto s = store->delete_catalog_entry("gpu", *id); !s) return fail(s.message());
      fmt::print("removed GPU '{}'\n", *id);
      return 0;
    }();
  });
}

}  // namespace kvlab::cli
