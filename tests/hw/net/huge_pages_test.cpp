// Large arrays on transparent huge pages (hw/net/huge_pages.h): small requests from
// operator new, large ones mapped 2 MiB-aligned; both hold what is written, and a
// HugeVector grows, copies and shrinks like a std::vector.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "hw/net/huge_pages.h"

namespace ptsim::hw::net {
namespace {

TEST(HugePages, LargeArraysAreAlignedAndHoldTheirContents) {
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, kHugeArrayMin - 1, kHugeArrayMin, kHugePage + 1,
                            std::size_t{5} * kHugePage}) {
    auto* p = static_cast<unsigned char*>(huge_alloc(bytes));
    ASSERT_NE(p, nullptr);
    if (bytes >= kHugeArrayMin) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kHugePage, 0u) << bytes;
    for (std::size_t i = 0; i < bytes; i += 997) p[i] = static_cast<unsigned char>(i);
    p[bytes - 1] = 7;
    for (std::size_t i = 0; i + 1 < bytes; i += 997) ASSERT_EQ(p[i], static_cast<unsigned char>(i)) << bytes;
    EXPECT_EQ(p[bytes - 1], 7);
    huge_free(p, bytes);
  }
  huge_free(nullptr, kHugePage);  // like delete of a null pointer
}

TEST(HugePages, VectorGrowsAcrossTheThreshold) {
  HugeVector<std::uint32_t> v;
  const std::size_t n = 3 * kHugePage / sizeof(std::uint32_t) + 5;  // from operator new to mapped and beyond
  for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<std::uint32_t>(i * 3));
  HugeVector<std::uint32_t> copy = v;
  ASSERT_EQ(copy.size(), n);
  for (std::size_t i = 0; i < n; i += 4099) EXPECT_EQ(copy[i], i * 3);
  EXPECT_EQ(copy.back(), (n - 1) * 3);
  copy.resize(10);
  copy.shrink_to_fit();
  EXPECT_EQ(std::accumulate(copy.begin(), copy.end(), 0u), 3u * 45u);
  EXPECT_THROW(HugePageAllocator<std::uint64_t>().allocate(~std::size_t{0} / 4), std::bad_array_new_length);
}

}  // namespace
}  // namespace ptsim::hw::net
