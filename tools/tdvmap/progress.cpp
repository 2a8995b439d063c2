#include "tools/tdvmap/progress.h"

namespace tdvmap {

void ProgressLine::update(int64_t done, int64_t total) {
  const Clock::time_point now = Clock::now();
  const bool end = done >= total;
  if (!end && now - last_ < std::chrono::milliseconds(100)) return;
  // a run that ends before the first redraw is too short to need a line
  if (end && !drawn_ && now - start_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
  std::fprintf(out_, "\rtdvmap: sets %lld/%lld, %.1f sets/s", static_cast<long long>(done),
               static_cast<long long>(total), rate);
  if (end)
    std::fprintf(out_, ", %.1f s\n", secs);
  else if (rate > 0)
    std::fprintf(out_, ", %.1f s left   ", static_cast<double>(total - done) / rate);
  std::fflush(out_);
}

}  // namespace tdvmap
