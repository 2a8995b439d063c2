// A program outside the tree, built against an installed td (find_package(td), td::td).
#include "engine/engine.h"
#include "modules/modules.h"
#include "vmap/vmap.h"
#include <iostream>
using namespace td;
int main() {
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 4; ++i) nets.push_back(std::make_shared<nn::Linear>(3, 1));
  TensorDict params = TensorDict::from_modules(nets);
  Value y = nn::functional_vmap(*nets[0], {.params = params, .args = {randn({10, 3})}});
  std::cout << y.tensor().shape() << "\n";
}
