// Large arrays on transparent huge pages.
//
// Why: the 65,536-GPU folded run touches about 150 MB once (topology links, the
// router's arcs, distance tables, route cache), and on 4 KiB pages that was 41,000
// page faults, a quarter of its CPU time, plus the TLB misses of random reads into
// 20-40 MB arrays (README "Performance"). An array of at least kHugeArrayMin bytes is
// mapped on its own, aligned to 2 MiB and marked MADV_HUGEPAGE, so the kernel backs it
// with 2 MiB pages where transparent huge pages are enabled ("madvise" or "always" in
// /sys/kernel/mm/transparent_hugepage/enabled; Linux admin-guide/mm/transhuge): one
// fault per 2 MiB instead of 512. Where they are off the mapping is ordinary memory.
// Smaller arrays come from operator new. Contents and results do not depend on it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace ptsim::hw::net {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;
inline constexpr std::size_t kHugeArrayMin = std::size_t{1} << 20;

// bytes of storage (uninitialised); throws std::bad_alloc when the system has none.
void* huge_alloc(std::size_t bytes);
// Frees what huge_alloc(bytes) returned (same bytes).
void huge_free(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(huge_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { huge_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace ptsim::hw::net
