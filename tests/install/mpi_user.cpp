// A program outside the tree using td::mpi from an installed td: two ranks share four sets.
#include <iostream>

#include "engine/engine.h"
#include "modules/modules.h"
#include "vmap/distributed.h"
using namespace td;
int main() {
  const dist::Communicator world;
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 4; ++i) nets.push_back(std::make_shared<nn::Linear>(3, 1));
  TensorDict params = TensorDict::from_modules(nets);
  Value y = dist::functional_vmap(world, *nets[0], {.params = params, .args = {randn({10, 3})}});
  if (world.rank() == 0)
    std::cout << y.tensor().shape() << " from " << world.size() << " ranks\n";
}
