// Broken: the host code dereferences a null pointer.
#include <kblaster/candidate.h>

extern "C" int kb_launch(const kb_args* a) {
  volatile int* nothing = nullptr;
  *nothing = a->num_inputs;
  return 0;
}
