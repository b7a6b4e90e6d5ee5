// detail::SmallVector: the decision path's lists of one element kept inline, and what it does once
// they grow past it (a batch), against std::vector's meaning of each operation.
#include "redlimit/detail/small_vector.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace {

using redlimit::detail::SmallVector;

std::vector<std::int64_t> as_vector(const SmallVector<std::int64_t, 2>& v) { return {v.begin(), v.end()}; }

TEST(SmallVectorTest, KeepsItsFirstElementsInsideAndTheRestOnTheHeap) {
  SmallVector<std::int64_t, 2> v;
  EXPECT_TRUE(v.empty());
  const std::int64_t* inside = v.data();
  v.push_back(10);
  v.push_back(11);
  EXPECT_EQ(v.data(), inside);  // within N: no allocation
  for (std::int64_t i = 12; i < 300; ++i) v.push_back(i);
  EXPECT_NE(v.data(), inside);
  ASSERT_EQ(v.size(), 290u);
  std::vector<std::int64_t> want(290);
  std::iota(want.begin(), want.end(), 10);
  EXPECT_EQ(as_vector(v), want);
  EXPECT_EQ(v.front(), 10);
  EXPECT_EQ(v.back(), 299);
}

TEST(SmallVectorTest, PushingItsOwnElementWhileGrowingCopiesItFirst) {
  SmallVector<std::int64_t, 1> v;
  v.push_back(7);
  v.push_back(v[0]);  // grows: the element read must survive the move to the heap
  v.push_back(v.back());
  v.push_back(v.front());
  ASSERT_EQ(v.size(), 4u);
  for (std::int64_t x : v) EXPECT_EQ(x, 7);
}

TEST(SmallVectorTest, ResizeAssignAndClearMeanWhatStdVectorsDo) {
  SmallVector<std::int64_t, 2> v;
  v.push_back(1);
  v.push_back(2);
  v.push_back(3);
  v.resize(2);
  EXPECT_EQ(as_vector(v), (std::vector<std::int64_t>{1, 2}));
  v.resize(5);  // value-initialised, also where the shrink left old values
  EXPECT_EQ(as_vector(v), (std::vector<std::int64_t>{1, 2, 0, 0, 0}));
  v.assign(3, v[1]);  // from one of its own elements
  EXPECT_EQ(as_vector(v), (std::vector<std::int64_t>{2, 2, 2}));
  v.assign(6, 4);
  EXPECT_EQ(as_vector(v), (std::vector<std::int64_t>(6, 4)));
  v[5] = 9;
  EXPECT_EQ(v.back(), 9);
  v.clear();
  EXPECT_TRUE(v.empty());
  v.push_back(8);
  EXPECT_EQ(as_vector(v), (std::vector<std::int64_t>{8}));
}

TEST(SmallVectorTest, CopiesAndMovesLeaveTwoIndependentLists) {
  const std::vector<std::int64_t> many{1, 2, 3, 4, 5};
  SmallVector<std::int64_t, 2> a(many.begin(), many.end());
  SmallVector<std::int64_t, 2> b = a;
  b[0] = 100;
  EXPECT_EQ(as_vector(a), many);
  EXPECT_EQ(b[0], 100);
  SmallVector<std::int64_t, 2> small(many.begin(), many.begin() + 1);
  SmallVector<std::int64_t, 2> moved = std::move(small);
  EXPECT_EQ(as_vector(moved), (std::vector<std::int64_t>{1}));
  moved = a;  // inline to heap
  EXPECT_EQ(as_vector(moved), many);
  a = SmallVector<std::int64_t, 2>(many.begin(), many.begin() + 2);  // heap back to two
  EXPECT_EQ(as_vector(a), (std::vector<std::int64_t>{1, 2}));
  std::vector<SmallVector<std::int64_t, 2>> lists;  // as the path keeps them (members_)
  for (int i = 0; i < 20; ++i) lists.emplace_back(many.begin(), many.begin() + i % 5);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(lists[static_cast<std::size_t>(i)].size(), static_cast<std::size_t>(i % 5));
}

}  // namespace
