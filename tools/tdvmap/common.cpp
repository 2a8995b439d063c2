#include "tools/tdvmap/common.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>

#include "engine/parallel.h"
#include "modules/modules.h"

namespace tdvmap {

namespace {
// "" when all of s reads as a T (from_chars: no leading '+', no wrap, no clamp), else why not
template <class T>
std::string read_whole(const std::string& s, const char* what) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return "'" + s + "' is out of range for " + what;
  if (ec != std::errc() || end != s.data() + s.size()) return "'" + s + "' is not " + what;
  return "";
}
}  // namespace

CLI::Validator whole_number() {
  return {[](std::string& s) { return read_whole<int64_t>(s, "an int64 integer"); }, "INT"};
}

CLI::Validator unsigned_number() {
  return {[](std::string& s) { return read_whole<uint64_t>(s, "an integer in [0, 2^64)"); },
          "UINT"};
}

CLI::Validator finite_number() {
  return {[](std::string& s) -> std::string {
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            if (s.empty() || *end != '\0') return "'" + s + "' is not a number";
            if (!std::isfinite(v)) return "'" + s + "' is not a finite number";
            return "";
          },
          "FLOAT"};
}

std::string shape_text(const td::Shape& s, bool compact) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? (compact ? "," : ", ") : "") << s[i];
  os << ']';
  return os.str();
}

LaunchedRanks launched_ranks() {
  auto read = [](const char* name) -> int {
    const char* v = std::getenv(name);
    int out = -1;
    if (v && std::from_chars(v, v + std::strlen(v), out).ec != std::errc()) out = -1;
    return out;
  };
  for (const auto& [rank, size] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                   std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    const int r = read(rank), n = read(size);
    if (n >= 1 && r >= 0 && r < n) return {r, n};
  }
  return {};
}

void set_thread_count(int threads) {
  // The environment covers pools created later; OpenBLAS's own pool already exists.
  const std::string n = std::to_string(threads);
  setenv("OPENBLAS_NUM_THREADS", n.c_str(), 1);
  setenv("OMP_NUM_THREADS", n.c_str(), 1);
  td::set_num_threads(threads);  // also OpenBLAS's pool, which already exists
}

std::shared_ptr<td::nn::Module> make_mlp(const std::vector<int64_t>& sizes, double dropout) {
  if (sizes.size() < 2) throw UsageError("an MLP needs at least two sizes, e.g. 64,256,10");
  for (int64_t s : sizes)
    if (s <= 0) throw UsageError("MLP sizes must be positive, got " + shape_text(sizes));
  auto seq = std::make_shared<td::nn::Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    seq->push_back(std::make_shared<td::nn::Linear>(sizes[i], sizes[i + 1]));
    if (i + 2 == sizes.size()) break;
    seq->push_back(std::make_shared<td::nn::ReLU>());
    if (i == 0 && dropout > 0) seq->push_back(std::make_shared<td::nn::Dropout>(dropout));
  }
  return seq;
}

double mlp_flops(const std::vector<int64_t>& sizes, int64_t rows) {
  double flops = 0;
  for (size_t i = 0; i + 1 < sizes.size(); ++i)
    flops += 2.0 * static_cast<double>(sizes[i]) * static_cast<double>(sizes[i + 1]);
  return flops * static_cast<double>(rows);
}

std::vector<double> medians_us(const std::vector<std::function<void()>>& fns, double min_time,
                               int repeat) {
  using Clock = std::chrono::steady_clock;
  using Seconds = std::chrono::duration<double>;
  constexpr int kBlocks = 10;
  for (const auto& fn : fns) fn(), fn();
  std::vector<std::vector<double>> times(fns.size());
  std::vector<double> spent(fns.size(), 0.0);
  auto unfinished = [&](size_t i) {
    return static_cast<int>(times[i].size()) < repeat || spent[i] < min_time;
  };
  for (bool more = true; more;) {
    more = false;
    for (size_t i = 0; i < fns.size(); ++i) {
      if (!unfinished(i)) continue;
      const auto block_end = Clock::now() + Seconds(min_time / kBlocks);
      do {
        const auto t0 = Clock::now();
        fns[i]();
        const auto t1 = Clock::now();
        times[i].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        spent[i] += Seconds(t1 - t0).count();
      } while (Clock::now() < block_end);
      more = more || unfinished(i);
    }
  }
  std::vector<double> medians;
  for (auto& t : times) {
    auto mid = t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2);
    std::nth_element(t.begin(), mid, t.end());
    medians.push_back(*mid);
  }
  return medians;
}

}  // namespace tdvmap
