#include "ps/sarray.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ps {
namespace {

TEST(SArrayTest, CopiesShareStorage) {
  SArray<int> a{1, 2, 3};
  SArray<int> b = a;
  b[0] = 9;
  EXPECT_EQ(a[0], 9);
  EXPECT_EQ(a.data(), b.data());
}

TEST(SArrayTest, SegmentIsAViewWithoutCopy) {
  SArray<int64_t> a{1, 2, 3, 4, 5};
  auto s = a.Segment(1, 4);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.data(), a.data() + 1);
  EXPECT_EQ(s[2], 4);
}

TEST(SArrayTest, ReinterpretAsBytesAndBack) {
  SArray<float> f{1.5f, -2.0f};
  SArray<char> bytes(f);
  EXPECT_EQ(bytes.size(), 8u);
  EXPECT_EQ(static_cast<void*>(bytes.data()), static_cast<void*>(f.data()));
  SArray<float> back(bytes);
  EXPECT_EQ(back[1], -2.0f);
}

TEST(SArrayTest, StorageOutlivesTheOriginal) {
  SArray<char> view;
  {
    SArray<int> a(1000, 7);
    view = SArray<char>(a).Segment(4, 8);
  }
  EXPECT_EQ(*reinterpret_cast<int*>(view.data()), 7);
}

TEST(SArrayTest, PushBackAppendResize) {
  SArray<int> a;
  for (int i = 0; i < 100; ++i) a.push_back(i);
  SArray<int> b{100, 101};
  a.append(b);
  EXPECT_EQ(a.size(), 102u);
  EXPECT_EQ(a[101], 101);
  SArray<int> many;
  for (int i = 0; i < 1000; ++i) many.append(SArray<int>{i});
  EXPECT_EQ(many.size(), 1000u);
  EXPECT_EQ(many[999], 999);
  EXPECT_LE(many.capacity(), 2048u) << "appending grows geometrically, not without bound";
  SArray<int> grown;
  for (int i = 0; i < 100000; ++i) grown.resize(grown.size() + 1, i);
  EXPECT_EQ(grown[99999], 99999);
  EXPECT_LE(grown.capacity(), 200000u) << "growth by resize is geometric";
  a.resize(105, -1);
  EXPECT_EQ(a[104], -1);
  EXPECT_EQ(a[50], 50);
}

}  // namespace
}  // namespace ps
