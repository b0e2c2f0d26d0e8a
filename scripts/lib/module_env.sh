# shellcheck shell=bash
# MODULE_ENV: a command prefix (`env -i NAME=VALUE ...`) that runs a process which executes
# problem files (pytorch_oracle.py resolve, selftest, aa; pytorch_baselines.py) with an explicit
# environment: the names kblaster gives such a process (module_environment_names() in
# src/common/environment.hpp), with their values here, and nothing else, so that an API key or
# another credential of this shell never reaches a problem file.
#   "${MODULE_ENV[@]}" python3 scripts/pytorch_oracle.py resolve ...
MODULE_ENV=(env -i)
for _name in PATH HOME USER LOGNAME LANG LC_ALL LC_CTYPE TZ TMPDIR LD_LIBRARY_PATH \
  XDG_CACHE_HOME CUDA_HOME CUDA_PATH KBLASTER_TASKS KBLASTER_ROOT KBLASTER_STORE_FILES \
  KBLASTER_PYTHON KBLASTER_NVCC KBLASTER_NCU KBLASTER_CUPTI KBLASTER_CACHE KBLASTER_BWRAP \
  KBLASTER_WORKER_EXE KBLASTER_RUNNER_EXACT PYTHONPATH PYTHONHOME PYTHONUNBUFFERED VIRTUAL_ENV \
  CONDA_PREFIX KBLASTER_GENERATOR_LIB KBLASTER_DEVICE_LOCK_DIR CUDA_VISIBLE_DEVICES \
  CUDA_DEVICE_ORDER CUDA_MODULE_LOADING CUDA_LAUNCH_BLOCKING CUDA_CACHE_DISABLE CUDA_CACHE_PATH \
  CUDA_CACHE_MAXSIZE CUDA_DEVICE_MAX_CONNECTIONS OMP_NUM_THREADS MKL_NUM_THREADS; do
  if [ -n "${!_name+x}" ]; then
    MODULE_ENV+=("$_name=${!_name}")
  fi
done
unset _name
