// The user's own catalogue entries (GPUs, imported models) on a real database file.
#include <gtest/gtest.h>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;

TEST(CatalogEntries, SaveReplaceListDeleteAndSurviveReopening) {
  const auto path = fresh_dir() / "runs.sqlite";
  {
    auto store = RunsStore::open(path);
    ASSERT_TRUE(store.ok()) << store.message();
    ASSERT_TRUE(store->save_catalog_entry("gpu", "my-gpu", {{"id", "my-gpu"}, {"gb", 10}}).ok());
    ASSERT_TRUE(store->save_catalog_entry("gpu", "a-gpu", {{"id", "a-gpu"}}).ok());
    ASSERT_TRUE(store->save_catalog_entry("model", "m", {{"id", "m"}}).ok());
    // Saving the same id again replaces it.
    ASSERT_TRUE(store->save_catalog_entry("gpu", "my-gpu", {{"id", "my-gpu"}, {"gb", 12}}).ok());
  }
  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  auto gpus = store->list_catalog_entries("gpu");
  ASSERT_TRUE(gpus.ok()) << gpus.message();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0]["id"], "a-gpu");
  EXPECT_EQ((*gpus)[1]["gb"], 12);
  EXPECT_EQ(store->list_catalog_entries("model")->size(), 1u);
  ASSERT_TRUE(store->delete_catalog_entry("gpu", "a-gpu").ok());
  auto missing = store->delete_catalog_entry("gpu", "a-gpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no gpu 'a-gpu' is stored"), std::string::npos);
  EXPECT_EQ(store->list_catalog_entries("gpu")->size(), 1u);
  EXPECT_FALSE(store->save_catalog_entry("gpu", "", {}).ok());
}

}  // namespace
}  // namespace kvlab
