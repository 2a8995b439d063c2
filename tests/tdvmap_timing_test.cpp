// tdvmap's timer (tools/tdvmap/common.cpp): interleaved rounds, one median per function.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "tools/tdvmap/common.h"

TEST_CASE("medians_us runs the functions in turn, each at least repeat + 2 times") {
  std::string order;
  auto med = tdvmap::medians_us({[&] { order += 'a'; }, [&] { order += 'b'; }}, 0.02, 7);
  REQUIRE(med.size() == 2);
  const auto a = std::count(order.begin(), order.end(), 'a');
  const auto b = std::count(order.begin(), order.end(), 'b');
  CHECK(a >= 9);
  CHECK(b >= 9);
  // two warm-up calls each, then blocks in turn: a timed 'b' comes before the last 'a'
  CHECK(order.substr(0, 4) == "aabb");
  CHECK(order.find('b', 4) < order.rfind('a'));
}

TEST_CASE("medians_us reports microseconds per call") {
  // sleep_for sleeps at least as long as asked: a lower bound only, which no machine breaks
  auto med = tdvmap::medians_us(
      {[] { std::this_thread::sleep_for(std::chrono::microseconds(300)); }, [] {}}, 0.01, 3);
  CHECK(med[0] >= 300.0);
  CHECK(med[1] < med[0]);
  CHECK(tdvmap::median_us([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); }, 0.0,
                          3) >= 200.0);
}
