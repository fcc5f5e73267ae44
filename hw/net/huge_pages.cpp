#include "hw/net/huge_pages.h"

#include <sys/mman.h>
#include <cstdint>
#include <new>

namespace ptsim::hw::net {
namespace {

std::size_t mapped_length(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

}  // namespace

void* huge_alloc(std::size_t bytes) {
  if (bytes < kHugeArrayMin) return ::operator new(bytes);
  const std::size_t len = mapped_length(bytes);
  if (len < bytes || len + kHugePage < len) throw std::bad_alloc();
  // Map one huge page more than needed and unmap the unaligned ends.
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) munmap(raw, aligned - begin);
  if (const std::uintptr_t end = begin + len + kHugePage; end > aligned + len)
    munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
  return reinterpret_cast<void*>(aligned);
}

void huge_free(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugeArrayMin) {
    ::operator delete(p);
    return;
  }
  munmap(p, mapped_length(bytes));
}

}  // namespace ptsim::hw::net
