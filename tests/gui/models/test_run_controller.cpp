// The run lifecycle every page shares, without a widget: start, progress with the time left,
// cancel, wait, the outcome, and stale results.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QTest>

#include "common/run_controller.h"
#include "stepping_runner.h"

namespace kvlab::gui {
namespace {

TEST(RunController, EstimatesTheTimeLeft) {
  EXPECT_EQ(RunController::time_left(50, 1000), QString()) << "too early to say";
  EXPECT_EQ(RunController::time_left(1, 60'000), QString()) << "too little done to say";
  EXPECT_EQ(RunController::time_left(25, 10'000), QStringLiteral("about 30 s left"));
  EXPECT_EQ(RunController::time_left(10, 60'000), QStringLiteral("about 9 min left"));
  EXPECT_EQ(RunController::time_left(99, 100'000), QStringLiteral("about a second left"));
  EXPECT_EQ(RunController::time_left(1, 36'000'000), QString()) << "under 3 % done";
  EXPECT_EQ(RunController::time_left(4, 3'600'000), QStringLiteral("about 24.0 h left"));
}

// One run at a time; a cancel is said until the worker stops; a run that ends without a result
// is a failure, never a run left hanging; the next run starts clean.
TEST(RunController, StartsCancelsAndEndsOneRunAtATime) {
  SteppingRunner runner;
  RunController controller(&runner);
  QSignalSpy running(&controller, &RunController::running_changed);
  QSignalSpy ended(&controller, &RunController::ended);
  ASSERT_TRUE(controller.start([&] { return runner.start(); }, QStringLiteral("starting")));
  EXPECT_TRUE(controller.running());
  EXPECT_EQ(controller.stage_text(), QStringLiteral("starting"));
  EXPECT_EQ(controller.percent(), 0);
  bool launched = false;
  EXPECT_FALSE(controller.start(
      [&] {
        launched = true;
        return true;
      },
      QStringLiteral("again")));
  EXPECT_FALSE(launched) << "a second run is not even launched";
  ASSERT_TRUE(
      QTest::qWaitFor([&] { return controller.stage_text() == QStringLiteral("step"); }, 5000));
  controller.cancel();
  EXPECT_TRUE(controller.cancelling());
  EXPECT_EQ(controller.stage_text(), QStringLiteral("Cancelling…"));
  ASSERT_TRUE(controller.wait_until_done(5000));
  EXPECT_FALSE(controller.running());
  EXPECT_FALSE(controller.cancelling());
  EXPECT_FALSE(controller.last_ok());
  EXPECT_FALSE(controller.last_error().isEmpty());
  EXPECT_EQ(controller.percent(), 0);
  EXPECT_EQ(controller.stage_text(), QString());
  ASSERT_EQ(running.count(), 2);
  EXPECT_TRUE(running.at(0).at(0).toBool());
  EXPECT_FALSE(running.at(1).at(0).toBool());
  ASSERT_EQ(ended.count(), 1);
  EXPECT_FALSE(ended.at(0).at(0).toBool());

  ASSERT_TRUE(controller.start([&] { return runner.start(); }, QStringLiteral("again")));
  EXPECT_EQ(controller.stage_text(), QStringLiteral("again")) << "no Cancelling… left over";
  EXPECT_TRUE(controller.last_error().isEmpty());
  controller.succeeded();  // what a page says from its runner's success signal
  EXPECT_TRUE(controller.last_ok());
  EXPECT_EQ(controller.percent(), 100);
  EXPECT_FALSE(controller.running());
  runner.cancel();
  ASSERT_TRUE(runner.wait_until_done(5000));
  EXPECT_TRUE(controller.last_ok()) << "the runner's end after the outcome changes nothing";
}

// A run past its time is cancelled and fails with the reason; a refused run reports why.
TEST(RunController, RunAndWaitCancelsARunPastItsTime) {
  SteppingRunner runner;
  RunController controller(&runner);
  EXPECT_FALSE(controller.run_and_wait(
      [&] { return controller.start([&] { return runner.start(); }, QStringLiteral("s")); }, 50));
  EXPECT_FALSE(controller.running());
  EXPECT_EQ(controller.last_error(), QStringLiteral("the run did not finish within 0 s"));
  EXPECT_FALSE(controller.run_and_wait(
      [&] {
        controller.note_error(QStringLiteral("no model chosen"));
        return false;
      },
      50));
  EXPECT_EQ(controller.last_error(), QStringLiteral("no model chosen"));
}

// Issue 45: results go stale when an input changes after a run, and fresh when a run shows its.
TEST(RunController, ResultsGoStaleOnlyAfterTheyAreShown) {
  SteppingRunner runner;
  RunController controller(&runner);
  QSignalSpy stale(&controller, &RunController::stale_changed);
  controller.input_changed();
  EXPECT_FALSE(controller.stale()) << "no results yet";
  controller.results_shown();
  controller.input_changed();
  controller.input_changed();
  EXPECT_TRUE(controller.stale());
  controller.results_shown();
  EXPECT_FALSE(controller.stale());
  controller.input_changed();
  controller.results_cleared();
  EXPECT_FALSE(controller.stale());
  EXPECT_EQ(stale.count(), 4) << "changes only";
}

}  // namespace
}  // namespace kvlab::gui
