// Broken: the host code gives up with abort().
#include <kblaster/candidate.h>
#include <stdlib.h>

extern "C" int kb_launch(const kb_args* a) {
  if (a->num_inputs > 0) {
    abort();
  }
  return 0;
}
