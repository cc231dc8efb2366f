//===- MpiTestMain.cpp - GoogleTest under mpirun -------------------------===//
//
// Starts MPI, then runs the tests on every rank: every rank must make the
// same collectives in the same order, so every rank runs every test. Rank 0
// prints GoogleTest's report; the other ranks print only their failures,
// each line prefixed with the rank. Any rank's failure fails the job.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiTest.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

namespace cleave::rt::comm {
namespace {

/// The session of this test process. (A test binary's one global: GoogleTest
/// tests take no arguments.)
std::unique_ptr<MpiSession> theSession;

class RankFailurePrinter : public testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // (GoogleTest holds its lock while it reports a result: remember the
  // test's name when it starts rather than asking for it then.)
  void OnTestStart(const testing::TestInfo &test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "rank %d: %s:%d: failure in %s\n%s\n", rank_,
                   result.file_name() ? result.file_name() : "?", result.line_number(),
                   test_.c_str(), result.message());
  }

private:
  int rank_;
  std::string test_;
};

} // namespace

const MpiSession &testSession() { return *theSession; }

} // namespace cleave::rt::comm

int main(int argc, char **argv) {
  using namespace cleave::rt::comm;
  testing::InitGoogleTest(&argc, argv);
  std::string error;
  theSession = MpiSession::start(error);
  if (!theSession) {
    std::fprintf(stderr, "cleave: error: MPI: %s\n", error.c_str());
    return 3;
  }
  if (theSession->worldRank() != 0) {
    testing::TestEventListeners &listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(theSession->worldRank()));
  }
  int status = RUN_ALL_TESTS();
  theSession.reset();
  return status;
}
