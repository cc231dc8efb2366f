"""The GPU check's timing step (scripts/gpu-check/check.py's check_timing)
run on CPU programs, so its logic is tested where there is no GPU: a small
examples/gpt2 decoder compiled for the CPU in fp32 and bf16 with zero
parameters, then check_timing puts random ones in (--init-from), trains
both programs and the PyTorch peer (torch.autocast on the CPU for bf16) on
the same batches, and must pass: the first losses agree within the check's
tolerances (1e-4 fp32, 1e-3 bf16) and the step times are finite.

    gpu_check_timing_on_cpu.py ROOT WORKDIR
"""
import gzip
import importlib.util
import os
import shutil
import subprocess
import sys

import onnx

ROOT, WORK = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "scripts", "gpu-check"))
import check  # noqa: E402

SHAPE = {"layers": 2, "width": 64, "heads": 4, "vocab": 512, "seq": 64, "batch": 2}

spec = importlib.util.spec_from_file_location(
    "make_model", os.path.join(ROOT, "examples", "gpt2", "make_model.py"))
make_model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_model)
model, parameters = make_model.build(SHAPE["layers"], SHAPE["width"], SHAPE["heads"],
                                     SHAPE["vocab"], SHAPE["seq"], "gpt2-weights.bin")
onnx_path = os.path.join(WORK, "gpt2.onnx")
onnx.save(model, onnx_path)
with open(os.path.join(WORK, "gpt2-weights.bin"), "wb") as f:
    f.truncate(4 * parameters)

check.PACK = WORK
entries = []
tokens = f"{SHAPE['batch']}x{SHAPE['seq']}"
for precision in ("fp32", "bf16"):
    name = f"gpt2-{precision}"
    out = os.path.join(WORK, "models", name)
    subprocess.run(["cleave", "compile", onnx_path, "-o", out, "--train", "--optimizer", "adamw",
                    "--lr", "0.0001", "--precision", precision, "--input-shape",
                    f"idx={tokens}", "--input-shape", f"targets={tokens}"], check=True)
    blob = os.path.join(out, "weights.bin")
    with open(blob, "rb") as source, gzip.open(blob + ".gz", "wb") as sink:
        shutil.copyfileobj(source, sink)
    entries.append({"name": name, "precision": precision})

summary = check.Summary()
check.check_timing(summary, dict(SHAPE, parameters=parameters, models=entries), 300,
                   dict(os.environ), device="cpu")
if len(summary.rows) != 2 or summary.failed():
    sys.exit(f"check_timing on CPU programs: {summary.rows}")
