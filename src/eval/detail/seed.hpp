// The seed of one evaluation: the one given (a replay, `eval --seed N`), else drawn from the
// system's CSPRNG. Kept below 2^53 so that every JSON reader holds it exactly.
#pragma once

#include "common/error.hpp"

#include <openssl/rand.h>

#include <cstdint>

namespace kb::eval::detail {

inline uint64_t evaluation_seed(uint64_t given) {
  uint64_t seed = given;
  while (seed == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&seed), sizeof seed) != 1) {
      fail("the system's random generator failed");
    }
    seed &= (uint64_t{1} << 53) - 1;
  }
  return seed;
}

} // namespace kb::eval::detail
