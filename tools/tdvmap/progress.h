#pragma once
// The progress line of a long `tdvmap run` on a terminal: sets done, rate and time left.
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace tdvmap {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out) : out_(out), start_(Clock::now()), last_(start_) {}
  // Redraws the line at most ten times a second, and at the end, where it ends the line.
  void update(int64_t done, int64_t total);

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  Clock::time_point start_, last_;
  bool drawn_ = false;
};

}  // namespace tdvmap
