// The seed of one evaluation (eval.hpp): given, or drawn from the system's CSPRNG.
#include "common/error.hpp"
#include "eval/eval.hpp"

#include <openssl/rand.h>

namespace kb::eval {

uint64_t evaluation_seed(uint64_t given) {
  uint64_t seed = given;
  while (seed == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&seed), sizeof seed) != 1) {
      fail("the system's random generator failed");
    }
    seed &= (uint64_t{1} << 53) - 1;
  }
  return seed;
}

} // namespace kb::eval
