// rtx::dist in one process: the TCP store (set/get/add/check/wait, timeouts, a prefix store) and a
// 2-rank gloo group whose ranks are threads, each with its own store client (the master in-process).
#include <thread>

#include "dist_test_utils.h"
#include "rtx/distributed.h"
#include "test_utils.h"

namespace rtx::testing {
namespace {

using namespace std::chrono_literals;
using dist::TCPStore;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(Distributed, TcpStore) {
  TCPStore master("127.0.0.1", 0, 2, true, 5s);
  ASSERT_GT(master.port(), 0);
  TCPStore client("127.0.0.1", master.port(), 2, false, 5s);
  client.set("k", bytes("v"));
  EXPECT_EQ(master.get("k"), bytes("v"));
  EXPECT_EQ(client.add("n", 5), 5);
  EXPECT_EQ(master.add("n", -2), 3);
  EXPECT_TRUE(client.check({"k", "n"}));
  EXPECT_FALSE(client.check({"k", "missing"}));
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    master.set("late", bytes("x"));
  });
  EXPECT_EQ(client.get("late"), bytes("x"));  // blocks until the other thread sets it
  later.join();
  EXPECT_EQ(master.num_keys(), 3);
  EXPECT_TRUE(client.delete_key("k"));
  EXPECT_FALSE(client.check({"k"}));
  dist::PrefixStore prefixed("g", std::shared_ptr<dist::Store>(&client, [](dist::Store*) {}));
  prefixed.set("a", bytes("1"));
  EXPECT_EQ(master.get("g/a"), bytes("1"));
}

TEST(Distributed, TcpStoreTimeouts) {
  TCPStore master("127.0.0.1", 0, std::nullopt, true, 200ms);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(throws<DistStoreError>([&] { master.get("absent"); }, "'absent'"));
  EXPECT_TRUE(throws<DistStoreError>([&] { master.wait({"a", "b"}, 100ms); }, "0.1 s"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  master.set("ok", bytes("1"));  // usable after a timeout
  EXPECT_EQ(master.get("ok"), bytes("1"));
  EXPECT_TRUE(throws<ValueError>([] { TCPStore("127.0.0.1", 0, std::nullopt, false, 1s); }, "only for the master"));
}

TEST(Distributed, GlooAllReduceAndBroadcastInThreads) {
  if (!dist::is_gloo_available()) GTEST_SKIP() << "this build has no gloo backend (install libgloo-dev)";
  std::vector<Tensor> sums(2), bcasts(2);
  const auto errors = run_rank_threads(2, 10s, gloo_group(10s), [&](int rank, const auto& pg) {
    Tensor t = full({3}, rank + 1.0, kFloat64);
    pg->all_reduce(t, dist::ReduceOp::Sum)->wait();
    sums[rank] = t;
    Tensor b = full({2, 2}, static_cast<double>(rank), kInt64);
    auto work = pg->broadcast(b, 1);
    EXPECT_TRUE(work->wait(5000ms));
    EXPECT_TRUE(work->is_completed() && work->is_success());
    bcasts[rank] = b;
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(sums[r].data_ptr<double>()[0], 3.0);
    EXPECT_EQ(sums[r].data_ptr<double>()[2], 3.0);
    EXPECT_EQ(bcasts[r].data_ptr<int64_t>()[3], 1);
  }
}

// A rank that closes its group as soon as it has one must not break the setup of a slower peer's:
// the group is made only when every rank has connected.
TEST(Distributed, GlooGroupClosedAtOnceLeavesPeersConnected) {
  if (!dist::is_gloo_available()) GTEST_SKIP() << "this build has no gloo backend (install libgloo-dev)";
  for (int trial = 0; trial < 40; ++trial) {
    const auto errors = run_rank_threads(2, 10s, gloo_group(10s), [](int, const auto&) {});
    ASSERT_EQ(errors, (std::vector<std::string>{"", ""})) << "trial " << trial;
  }
}

TEST(Distributed, DefaultGroupErrors) {
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_TRUE(throws<ValueError>([] { dist::default_group(); }, "Default process group has not been initialized"));
  dist::InitOptions o;
  o.backend = "nccl";
  if (!dist::is_nccl_available()) {
    EXPECT_TRUE(throws<DistBackendError>([&] { dist::init_process_group(o); }, "no nccl backend"));
  }
}

}  // namespace
}  // namespace rtx::testing
