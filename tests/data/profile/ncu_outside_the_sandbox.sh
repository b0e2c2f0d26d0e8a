#!/bin/sh
# A stand-in for Nsight Compute that works where the profile test runs it directly (the counter
# probe: KBLASTER_PROFILE_TEST_NCU is set there) and fails inside the sandbox, whose environment
# holds no such variable: it exits as CUDA's bin/ncu does when it cannot reach its installation.
if [ -z "$KBLASTER_PROFILE_TEST_NCU" ]; then
  echo "ERROR : nsight-compute directory is not found (stand-in for a tool the sandbox cannot reach)" >&2
  exit 1
fi
exec "$KBLASTER_PROFILE_TEST_NCU" "$@"
