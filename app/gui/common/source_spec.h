// What a page's source names: a synthetic preset (layers, context, seed), a file (.safetensors,
// .npz, .npy, or a folder of .npy files), or the cache captured from a real model. The Source
// panel (source_panel.h) edits one; the runners load it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <QString>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::gui {

struct SourceSpec {
  enum class Kind { Synthetic, File, Model };
  Kind kind = Kind::Synthetic;
  SyntheticConfig synthetic;
  QString file;
  // Kind::Model: the cache the panel captured (null before a capture), never changed once
  // captured, the model it came from, and the capture's number (a new one for every capture).
  std::shared_ptr<const KvCache> captured;
  QString model;
  std::uint64_t capture_id = 0;

  // Equal keys produce the same cache, so the generated or loaded cache can be reused when only
  // the method changes. A file's key includes its size and modification time; a capture's key
  // is its number.
  std::string cache_key() const;
  QString describe() const;  // "synthetic llama3-8b, 1024 tokens, seed 1"
};

}  // namespace kvlab::gui
