// User code compiled for AVX-512 at -O3 with no flag of td's (GCC 12 miscompiled initialisers
// such as {1, 1, 0, 0} there when td's build added -fno-tree-slp-vectorize for its own code):
// td's headers must be safe to include as they are. Run only on a CPU with AVX-512.
#include <iostream>

#include "engine/engine.h"
using namespace td;
int main() {
  const Shape a{1, 1, 0, 0}, b{5, 5, 0, 0}, c{7, 7, 7, 0};
  const bool ok = a.size() == 4 && a[0] == 1 && a[1] == 1 && a[2] == 0 && a[3] == 0 &&
                  b[1] == 5 && b[2] == 0 && c[2] == 7 && c[3] == 0 &&
                  ones({1, 1, 0, 0}).numel() == 0 && ones({2, 3}).sum().item<double>() == 6.0;
  std::cout << (ok ? "user code at x86-64-v4: ok" : "user code at x86-64-v4: WRONG") << "\n";
  return ok ? 0 : 1;
}
