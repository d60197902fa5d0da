#include "server/tenant_limiter.h"

namespace kvserve {

TenantLimiter::TenantLimiter(int max_per_tenant) : max_per_tenant_(max_per_tenant) {}

std::unique_ptr<TenantLimiter::Lease> TenantLimiter::Acquire(const std::string& tenant) {
  {
    std::lock_guard lock(mutex_);
    int& count = in_flight_[tenant];
    if (max_per_tenant_ > 0 && count >= max_per_tenant_) {
      return nullptr;
    }
    ++count;
  }
  return std::make_unique<Lease>(*this, tenant);
}

int TenantLimiter::in_flight(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  auto it = in_flight_.find(tenant);
  return it == in_flight_.end() ? 0 : it->second;
}

void TenantLimiter::Release(const std::string& tenant) {
  std::lock_guard lock(mutex_);
  auto it = in_flight_.find(tenant);
  if (it != in_flight_.end() && --it->second <= 0) in_flight_.erase(it);
}

}  // namespace kvserve
