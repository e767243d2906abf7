// Helpers shared by the GUI tests: a fresh folder per test, the tiny synthetic source, and the
// engine's own report for it (computed here, independently of the widgets).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <QObject>
#include <QString>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "common/source_spec.h"
#include "eviction/eviction_runner.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/synthetic.h"
#include "scratch_dir.h"

namespace kvlab::gui_test {

// KVLAB_TEST_TMPDIR/<suite>.<test>.<pid>, emptied first.
inline std::filesystem::path fresh_dir() {
  return test::fresh_test_dir(KVLAB_TEST_TMPDIR);
}

// Two layers, 2 KV heads of 16 channels, 96 tokens: milliseconds to generate and compress.
inline SyntheticConfig tiny_source() {
  SyntheticConfig c;
  c.preset = "tiny";
  c.layers = 0;
  c.context = 96;
  c.seed = 7;
  return c;
}

// Age-tiered with small windows, so every layer has two histograms (INT8 tier, INT4 tier).
inline MethodConfig tiered_method() {
  MethodConfig m;
  m.kind = MethodKind::Tiered;
  m.group_size = 8;
  m.residual = 16;
  m.int8_tokens = 32;
  m.old_bits = 4;
  return m;
}

// The child of `parent` of type W named `name` (its objectName): how a test finds the field it
// drives, so the pages hand out no widgets. A missing child throws, which fails the test with
// the name instead of crashing on a null pointer.
template <class W>
W* child(const QObject* parent, const char* name) {
  W* found = parent->findChild<W*>(QString::fromLatin1(name));
  if (found == nullptr) {
    throw std::runtime_error(std::string("no ") + W::staticMetaObject.className() + " named '" +
                             name + "' under " + parent->metaObject()->className());
  }
  return found;
}

// Whether the form row holding `panel`'s field `name` is shown (MethodPanel and
// EvictionPolicyPanel show only the fields of the chosen method or policy).
template <class Panel>
bool field_shown(const Panel& panel, const char* name) {
  return panel.is_field_visible(child<QWidget>(&panel, name));
}

inline CompressionReport engine_report(const SyntheticConfig& source, const MethodConfig& method) {
  auto cache = generate_synthetic(source);
  EXPECT_TRUE(cache.ok()) << cache.message();
  auto report = compress_cache(*cache, method);
  EXPECT_TRUE(report.ok()) << report.message();
  return *report;
}

// The engine's eviction report for the job the Eviction page runs on `synthetic` (its steps as
// the source's queries, make_eviction_job), computed without the page.
inline EvictionReport engine_eviction_report(const SyntheticConfig& synthetic,
                                             const EvictionConfig& config) {
  gui::SourceSpec spec;
  spec.synthetic = synthetic;
  const gui::EvictionJob job = gui::make_eviction_job(spec, config, std::nullopt);
  auto cache = generate_synthetic(job.source.synthetic);
  EXPECT_TRUE(cache.ok()) << cache.message();
  auto report = simulate_eviction(*cache, job.policy);
  EXPECT_TRUE(report.ok()) << report.message();
  return *report;
}

}  // namespace kvlab::gui_test
