# Inductor's kernels for F.rms_norm (torch.compile, default mode) at the shapes given on the
# command line as dtype:tokens:hidden (f32, f16 or bf16), with the launch config each settled on.
# With TORCH_LOGS=output_code it logs the generated Triton source; under ncu with a kernel filter
# (-k regex:triton --launch-skip 2 --launch-count 1) it profiles the third call of one shape.
# Needs a CUDA device and PyTorch. Output on the H200: evidence/h200/llm/profiles-d3d07ce/.
import gc, sys, torch
import torch.nn.functional as F
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
for spec in sys.argv[1:]:
    d, t, h = spec.split(":"); t = int(t); h = int(h)
    torch._dynamo.reset()
    x = torch.randn(t, h, device="cuda", dtype=DT[d]); w = torch.randn(h, device="cuda", dtype=DT[d])
    fn = torch.compile(lambda x, w: F.rms_norm(x, (h,), w, 1e-6))
    for _ in range(3):
        fn(x, w)
    torch.cuda.synchronize()
    for o in gc.get_objects():
        try:
            tuner = isinstance(o, CachingAutotuner)
        except ReferenceError:  # a dead weak proxy among the objects
            continue
        if tuner:
            cfgs = [str(l.config) for l in getattr(o, "launchers", [])]
            print(f"{spec}: {o.fn.__name__} configs={cfgs} size_hints={getattr(o, 'size_hints', None)}", flush=True)
