// A sweep: many runs described in one JSON file, models × texts × methods for quality or
// sources × methods for compression, cut into shards so that N processes (GNU parallel on one
// machine, a Slurm array on a cluster) each make a part of it into a database of their own,
// which `kvlab runs import` then merges (docs/GUIDES.md).
//
// Every item has a key, made only from what the item measures (kind, model or source, text,
// window, method and eviction parameters): it is the uid its run is stored under. So a shard run
// again skips the items its database holds (a preempted job resumes), and a merge keeps one copy
// of an item that two databases both made. No Qt.
//
// The file (keys not listed are an error, so that a typo does not silently measure something
// else):
//   {"kind": "quality",
//    "models": ["SmolLM2-135M-Instruct.Q4_1.gguf"],        // .gguf, llama2.c .bin or HF folder
//    "texts": ["/usr/share/common-licenses/GPL-3", "sampled:4096"],  // a UTF-8 file or sampled
//    "max_tokens": 8192, "window": 0, "stride": 0,         // optional, as in `kvlab quality`
//    "methods": [{"method": "int8"}, {"method": "kivi", "bits": 2},
//                {"eviction": {"policy": "h2o", "budget": "50%"}}]}
//   {"kind": "compression",
//    "sources": ["synthetic:llama3-8b", "file:kv.safetensors"],
//    "context": 4096, "layers": 0, "seed": 1, "queries": 8,  // optional, synthetic sources only
//    "methods": [{"method": "kvcomp", "rel_scale": 0.05, "codec": "huffman"}]}
// A method entry is a run's own params as `kvlab runs show --json` prints them: the method id
// and its parameters (method_json.h), and for quality an optional "eviction" object
// (eviction_json.h); "method": "none" or no "method" measures eviction alone.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {

enum class SweepKind { Quality, Compression };

struct SweepItem {
  int index = 0;  // 0-based, in the order of the whole sweep
  SweepKind kind = SweepKind::Quality;
  std::string model;                         // quality: the path as written in the file
  std::string text;                          // quality: "file:PATH" or "sampled:N"
  std::string source;                        // compression: "synthetic:PRESET" or "file:PATH"
  std::optional<SyntheticConfig> synthetic;  // compression, synthetic sources
  std::optional<MethodConfig> method;
  std::optional<EvictionConfig> eviction;  // quality only
  nlohmann::json spec;                     // what the key is made of
  std::string uid;                         // "sweep-" and 32 hex digits of the spec
  std::string title;                       // "model × text × method", for progress lines
};

struct SweepPlan {
  SweepKind kind = SweepKind::Quality;
  int window = 0;      // quality: tokens per window (0: the model's context)
  int stride = 0;      // quality: text tokens between window starts (0: side by side)
  int max_tokens = 0;  // quality, text files: score only the first N tokens (0: all)
  std::vector<SweepItem> items;
};

// Part I of N (1-based): the items whose index is I − 1 modulo N, so that items of every kind
// are spread over the shards. Every item is in exactly one shard.
struct SweepShard {
  int index = 1;
  int count = 1;
  // "I/N" with 1 ≤ I ≤ N; the error names the text.
  static Result<SweepShard> parse(std::string_view text);
  bool contains(const SweepItem& item) const { return item.index % count == index - 1; }
};

// `where` names the file in errors: "sweep.json: methods[2]: kivi bits must be 2 or 4".
Result<SweepPlan> parse_sweep(const nlohmann::json& j, const std::string& where);
Result<SweepPlan> load_sweep_file(const std::filesystem::path& path);

std::vector<const SweepItem*> shard_items(const SweepPlan& plan, const SweepShard& shard);

}  // namespace kvlab
