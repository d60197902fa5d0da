// TenantLimiter (--max-concurrent-per-key): places per tenant, released with their leases, from
// many threads at once.
#include "server/tenant_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kvserve {
namespace {

TEST(TenantLimiterTest, PlacesPerTenant) {
  TenantLimiter limiter(2);
  auto a1 = limiter.Acquire("a");
  auto a2 = limiter.Acquire("a");
  ASSERT_TRUE(a1 && a2);
  EXPECT_FALSE(limiter.Acquire("a"));
  auto b1 = limiter.Acquire("b");  // another tenant is not affected
  EXPECT_TRUE(b1);
  EXPECT_EQ(limiter.in_flight("a"), 2);
  a1.reset();
  EXPECT_EQ(limiter.in_flight("a"), 1);
  EXPECT_TRUE(limiter.Acquire("a"));  // taken and released at once
  EXPECT_EQ(limiter.in_flight("a"), 1);
  a2.reset();
  b1.reset();
  EXPECT_EQ(limiter.in_flight("a"), 0);
  EXPECT_EQ(limiter.in_flight("b"), 0);
}

TEST(TenantLimiterTest, ZeroMeansNoLimit) {
  TenantLimiter limiter(0);
  std::vector<std::unique_ptr<TenantLimiter::Lease>> leases;
  for (int i = 0; i < 1000; ++i) leases.push_back(limiter.Acquire("a"));
  for (const auto& lease : leases) EXPECT_TRUE(lease);
  EXPECT_EQ(limiter.in_flight("a"), 1000);
}

TEST(TenantLimiterTest, NeverMoreThanTheLimitAcrossThreads) {
  TenantLimiter limiter(3);
  std::atomic<int> held{0}, most{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto lease = limiter.Acquire("k");
        if (!lease) {
          ++refused;
          continue;
        }
        const int now = ++held;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --held;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(limiter.in_flight("k"), 0);
}

}  // namespace
}  // namespace kvserve
