// Broken: asks the harness for a workspace far beyond the card.
#include <kblaster/candidate.h>

extern "C" int kb_workspace_bytes(const kb_args*, uint64_t* bytes) {
  *bytes = uint64_t(1) << 50; // 1 PiB
  return 0;
}

extern "C" int kb_launch(const kb_args*) { return 0; }
