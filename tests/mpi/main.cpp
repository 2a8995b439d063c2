// The doctest runner of the multi-rank tests: every rank runs every case (each case's collectives
// need them all); MPI is initialised by the first Communicator and finalised at exit.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "vmap/distributed.h"

int main(int argc, char** argv) {
  const td::dist::Communicator world;  // initialises MPI before any case
  doctest::Context context(argc, argv);
  const int failed = context.run();
  // a rank whose checks failed fails the whole mpirun
  return failed != 0 ? 1 : 0;
}
