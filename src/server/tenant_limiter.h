// Per-key concurrency: at most N requests of one tenant (one API key, or everyone when the server
// has no keys) in flight at once; the next one gets 429 with Retry-After instead of a place in the
// engine's queue, so one key cannot fill the queue that every key shares
// (--max-concurrent-per-key).
//
//   TenantLimiter limiter(4);
//   auto lease = limiter.Acquire(tenant);     // nullptr: over the limit, answer 429
//   ...                                       // the request runs while `lease` lives
//
// Thread-safe. A lease may outlive the call that took it (a streamed response holds it until the
// stream ends) but not the limiter.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kvserve {

class TenantLimiter {
 public:
  class Lease {
   public:
    Lease(TenantLimiter& limiter, std::string tenant)
        : limiter_(limiter), tenant_(std::move(tenant)) {}
    ~Lease() { limiter_.Release(tenant_); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

   private:
    TenantLimiter& limiter_;
    std::string tenant_;
  };

  explicit TenantLimiter(int max_per_tenant);  // 0 = no limit

  // A lease on one of `tenant`'s places, or nullptr when all are taken.
  std::unique_ptr<Lease> Acquire(const std::string& tenant);
  int in_flight(const std::string& tenant) const;
  int limit() const { return max_per_tenant_; }

 private:
  void Release(const std::string& tenant);

  const int max_per_tenant_;
  mutable std::mutex mutex_;
  std::map<std::string, int, std::less<>> in_flight_;  // tenant tag -> leases held; no zeros
};

}  // namespace kvserve
