"""The GPU check's timing step (scripts/gpu-check/check.py's check_timing)
run on CPU programs, so its logic is tested where there is no GPU: the pack's
tiny timing model (pack.py's pack_timing) compiled for the CPU in fp32 and
bf16 with zero parameters, then check_timing puts random ones in
(--init-from), trains both programs and the PyTorch peer (torch.autocast on
the CPU for bf16) on the same batches, and must pass: the first losses agree
within the check's tolerances (1e-4 fp32, 1e-3 bf16) and the step times are
finite.

    gpu_check_timing_on_cpu.py ROOT WORKDIR
"""
import os
import sys

ROOT, WORK = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "scripts", "gpu-check"))
import check  # noqa: E402
import pack  # noqa: E402

timing = pack.pack_timing("cleave", "tiny", WORK, WORK, target=())
check.PACK = WORK
summary = check.Summary()
check.check_timing(summary, timing, 300, dict(os.environ), device="cpu")
if len(summary.rows) != 2 or summary.failed():
    sys.exit(f"check_timing on CPU programs: {summary.rows}")
