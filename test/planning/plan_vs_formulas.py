# cleave plan's figures against references it does not compute itself:
#   - model-state bytes per rank (parameters, gradients, Adam's two moments,
#     fp32) for dp=2 and dp=4 against the ZeRO paper's formulas for the
#     model's parameter count Psi: DP 16 Psi, ZeRO-1 4 Psi + 4 Psi + 8 Psi / N,
#     ZeRO-2 4 Psi + 12 Psi / N, ZeRO-3 16 Psi / N; with --precision bf16
#     the fp32 parameters are master weights, and each element of a weight
#     a product reads (Psi_m: the Linear weights; not the biases, added in
#     f32) has a bf16 copy: DP 16 Psi + 2 Psi_m, ZeRO-3 (16 Psi + 2 Psi_m) / N
#     (the slices' copies), and ZeRO-1 and 2, whose masters are slices
#     gathered once a step, 2 Psi_m + 4 (Psi - Psi_m) for the gathered
#     copies (bf16 where products read them, f32 elsewhere) + 4 Psi of
#     gradients (ZeRO-1; f32, as Megatron's 6 + 12/d bytes with fp32
#     gradients) + 12 Psi / N (ZeRO-1) or 16 Psi / N (ZeRO-2); and with
#     --grad-accum-dtype bf16 too, the ZeRO paper's mixed-precision split
#     (2 bytes of gradient where there were 4): DP 14 Psi + 2 Psi_m, ZeRO-1
#     the copies + 2 Psi + 12 Psi / N, ZeRO-2 the copies + 14 Psi / N,
#     ZeRO-3 (14 Psi + 2 Psi_m) / N: the paper's 16 Psi, 2 Psi + 2 Psi +
#     12 Psi / N, 2 Psi + 14 Psi / N and 16 Psi / N where every parameter is
#     a weight (Psi_m = Psi) (within the alignment
#     padding the flat buffers and tensors carry: never below, at most 0.5%
#     plus 1 KiB above);
#   - each layout's predicted step time against the model docs/formats.md
#     documents, computed here from the device file and the layout's own
#     plan.json (compiled again with --emit mlir), in fp32 and with
#     --precision bf16 (whose products all count at the device's
#     low-precision rate): a function's calls x
#     (product FLOPs / product rate + low-precision product FLOPs / its rate
#     + other bytes / memory rate + streamed
#     bytes / streaming rate + kernel calls x call time), plus per collective calls x steps x latency + bytes
#     sent / bandwidth on its axis's link (the link's rate for its kind of
#     collective where the device file gives one: the test device's
#     reduce-scatters and all-gathers have their own); a pipeline's time lies between its
#     slowest stage's work and the sum of every stage's (its messages, which
#     its plans count, each a step of the pp link and its bytes at the
#     link's bandwidth); and with
#     --device cpu (this machine measured: its link's all-reduce,
#     reduce-scatter and all-gather rates, each matrix product plan.json
#     lists timed alone (the plan's product_times), and the timing run's
#     scales) the same model with each listed product at its time (the
#     others' FLOPs at the rates), and the products' time, the other
#     kernels' and each kind of collective's (all-reduces, reduce-scatters,
#     all-gathers) each multiplied by its own scale;
#   - the predicted peak of layouts that run here (dp=2 with ZeRO 0 and 3,
#     pp=2 with 1f1b and with the interleaved schedule, M=2, dp=2 with ZeRO 1
#     and M=2, in fp32, bf16 and bf16 with bf16 gradients, and ZeRO 2 in
#     bf16) against the
#     program's measured peak, byte for byte (rank 0, whose plan.json is the
#     first stage's in a pipeline; with the interleaved schedule the sum of
#     its stages', the largest scratch once), and cleave plan's peak the
#     largest rank's.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rank_memory import rank_peak  # noqa: E402
from torch_export import export_with_loss  # noqa: E402

DEVICE = os.path.join(HERE, "Inputs", "two-nodes.json")
KINDS = ["all_gather", "all_reduce", "reduce_scatter"]


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (torch.nn.Linear(128, 512), torch.nn.Linear(512, 512),
                                        torch.nn.Linear(512, 10))

    def forward(self, x, labels):
        hidden = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        return torch.nn.functional.cross_entropy(self.fc3(hidden), labels)


def plan(work, model, ranks, name, precision="fp32", flags=(), device=DEVICE):
    out = os.path.join(work, f"{name}.json")
    subprocess.run(["cleave", "plan", model, "--ranks", str(ranks), "--device", device,
                    "--optimizer", "adam", "--batch-size", "16", "--precision", precision,
                    *flags, "--json", out], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))


def compile_layout(work, model, layout, name, emit="mlir", precision="fp32"):
    out = os.path.join(work, name)
    subprocess.run(["cleave", "compile", model, "-o", out, "--train", "--optimizer", "adam",
                    "--batch-size", "16", "--precision", precision, "--emit", emit,
                    *layout["flags"].split()], check=True)
    stages = [os.path.join(out, "plan.json")]
    if layout["pp"] > 1:
        stages = [os.path.join(out, f"stage{s}", "plan.json")
                  for s in range(layout["pp"] * layout["virtual_stages"])]
    return out, [json.load(open(path)) for path in stages]


def rank_peaks(layout, stages):
    """Each pp rank's predicted peak, from those of its stages (stage s on
    rank s mod pp)."""
    return [rank_peak([s["memory"] for s in stages[rank::layout["pp"]]])
            for rank in range(layout["pp"])]


def product_seconds(device, cost, product_times):
    """A function's products: those cleave plan timed on this machine
    (--device cpu's product_times, matched by every field but the calls) at
    their time, the others' FLOPs at the device's rates."""
    flops = {False: cost["product_flops"], True: cost["low_precision_product_flops"]}
    seconds = 0.0
    for product in cost.get("products", []):
        shape = {k: v for k, v in product.items() if k != "calls"}
        timed = [t["seconds"] for t in product_times
                 if {k: v for k, v in t.items() if k != "seconds"} == shape]
        if timed:
            seconds += product["calls"] * timed[0]
            flops[product["low_precision"]] -= (product["calls"] * 2 * product["batch"]
                                                * product["m"] * product["n"] * product["k"])
    return (seconds + max(flops[False], 0) / device["product_flops_per_second"]
            + (flops[True] / device["low_precision_product_flops_per_second"]
               if flops[True] > 0 else 0))


def function_seconds(device, plan_json, name, scale, product_times=()):
    for cost in plan_json["cost"]:
        if cost["function"] == name:
            products = product_seconds(device, cost, product_times)
            other = ((cost["other_bytes"] - cost["streamed_bytes"])
                     / device["memory_bytes_per_second"]
                     + cost["streamed_bytes"] / device["streaming_bytes_per_second"]
                     + cost["kernel_calls"] * device["kernel_seconds"])
            return scale["products"] * products + scale["other"] * other
    return 0.0


def axis_link(device, layout, axis):
    """The intra-node link where the axis's groups lie in one node (ranks
    row-major over pp, dp, tp), else the inter-node one."""
    sizes = {"dp": layout["dp"], "tp": layout["tp"], "pp": layout["pp"]}
    strides = {"tp": 1, "dp": layout["tp"], "pp": layout["tp"] * layout["dp"]}
    within = strides[axis] * sizes[axis] <= device["ranks_per_node"]
    return device["links"]["intra_node" if within else "inter_node"]


def message_seconds(device, layout, cost):
    """A call's pipeline messages: a step of the pp link each, and their
    bytes at its bandwidth."""
    link = axis_link(device, layout, "pp")
    return (cost["messages"] * link["latency_seconds"]
            + cost["message_bytes"] / link["bandwidth_bytes_per_second"])


def communication_seconds(device, layout, plan_json, scale):
    """The step's collectives at their links' rates, each times its kind's
    scale."""
    sizes = {"dp": layout["dp"], "tp": layout["tp"], "pp": layout["pp"]}
    seconds = 0.0
    for c in plan_json.get("collectives", []):
        n = sizes[c["axis"]]
        link = axis_link(device, layout, c["axis"])
        # A kind with a rate of its own takes it, the others the link's.
        link = link.get(c["kind"], link)
        steps = 2 * (n - 1) if c["kind"] == "all_reduce" else n - 1
        seconds += scale["collectives"][c["kind"]] * (
            c["calls_per_step"] * steps * link["latency_seconds"]
            + c["bytes_sent_per_rank"] / link["bandwidth_bytes_per_second"])
    return seconds


def step_time_problems(work, model, precision, device_flag=DEVICE):
    """Each layout `cleave plan --precision --device` ranks on 2 ranks: its
    predicted step time against the documented model from its own plan.json,
    the device and compute scales the plan gives."""
    problems = []
    tag = f"{precision}-{os.path.basename(device_flag)}"
    planned = plan(work, model, 2, f"plan2-{tag}", precision, device=device_flag)
    device, scale = planned["device"], planned["compute_scale"]
    times = planned["product_times"]
    if device_flag == "cpu":
        link = device["links"]["intra_node"]
        if not all(link.get(kind, {}).get("bandwidth_bytes_per_second", 0) > 0
                   for kind in ("reduce_scatter", "all_gather")):
            problems.append(f"--device cpu: no measured reduce-scatter or all-gather rate: {link}")
        if not (scale["products"] > 0 and scale["other"] > 0
                and sorted(scale["collectives"]) == KINDS
                and all(v > 0 for v in scale["collectives"].values())):
            problems.append(f"--device cpu: compute scales {scale}")
        if not times or not all(t["seconds"] > 0 for t in times):
            problems.append(f"--device cpu: products timed {times}")
    elif times or scale != {"products": 1, "other": 1,
                            "collectives": {kind: 1 for kind in KINDS}}:
        problems.append(f"{device_flag}: products timed or scales measured on this machine: "
                        f"{times}, {scale}")
    for i, layout in enumerate(planned["layouts"]):
        _, stages = compile_layout(work, model, layout, f"layout{i}-{tag}", precision=precision)
        predicted = layout["step_seconds"]
        if precision == "bf16" and any(c["product_flops"] for s in stages for c in s["cost"]):
            problems.append(f"{layout['flags']} bf16: products on f32 factors in plan.json")
        if layout["pp"] == 1:
            plan_json = stages[0]
            expected = sum(c["calls_per_step"]
                           * function_seconds(device, plan_json, c["function"], scale, times)
                           for c in plan_json["cost"])
            expected += communication_seconds(device, layout, plan_json, scale)
            if abs(predicted / expected - 1) > 1e-9:
                problems.append(f"{layout['flags']} {precision}: predicted {predicted} s, the "
                                f"documented model gives {expected} s")
            continue
        work_per_stage = [sum(c["calls_per_step"]
                              * (function_seconds(device, s, c["function"], scale, times)
                                 + message_seconds(device, layout, c))
                              for c in s["cost"]) + communication_seconds(device, layout, s, scale)
                          for s in stages]
        if not any(c["messages"] for s in stages for c in s["cost"]):
            problems.append(f"{layout['flags']}: no pipeline message in its plans")
        if not max(work_per_stage) * (1 - 1e-9) <= predicted <= sum(work_per_stage) * (1 + 1e-9):
            problems.append(f"{layout['flags']} {precision}: predicted {predicted} s outside "
                            f"[{max(work_per_stage)}, {sum(work_per_stage)}]")
    print(f"step times of {len(planned['layouts'])} {precision} layouts on {device['name']} "
          f"checked (scales: products {scale['products']:.3g}, other kernels "
          f"{scale['other']:.3g}, collectives "
          f"{', '.join(f'{k} {v:.3g}' for k, v in scale['collectives'].items())})")
    return problems


def main(work):
    problems = []
    torch.manual_seed(0)
    model = os.path.join(work, "mlp.onnx")
    export_with_loss(Mlp(), (torch.randn(8, 128), torch.randint(0, 10, (8,))), model,
                     ["x", "labels"], dynamic_axes={"x": {0: "batch"}, "labels": {0: "batch"}})
    psi = sum(p.numel() for p in Mlp().parameters())
    multiplied = sum(p.numel() for p in Mlp().parameters() if p.dim() == 2)

    # Model-state bytes against the ZeRO paper's formulas.
    formulas = {0: lambda n: 16 * psi, 1: lambda n: 8 * psi + 8 * psi / n,
                2: lambda n: 4 * psi + 12 * psi / n, 3: lambda n: 16 * psi / n}
    gathered = 2 * multiplied + 4 * (psi - multiplied)
    mixed = {0: lambda n: 16 * psi + 2 * multiplied, 1: lambda n: gathered + 4 * psi + 12 * psi / n,
             2: lambda n: gathered + 16 * psi / n, 3: lambda n: (16 * psi + 2 * multiplied) / n}
    # With bf16 gradient accumulators too, the ZeRO paper's mixed-precision
    # split: 2 + 2 + 12 bytes a parameter (the biases' copies f32).
    paper = {0: lambda n: 14 * psi + 2 * multiplied,
             1: lambda n: gathered + 2 * psi + 12 * psi / n, 2: lambda n: gathered + 14 * psi / n,
             3: lambda n: (14 * psi + 2 * multiplied) / n}
    bf16_gradients = ["--grad-accum-dtype", "bf16"]
    cases = [(ranks, precision, flags, label, table)
             for precision, flags, label, table in (("fp32", [], "fp32", formulas),
                                                    ("bf16", [], "bf16", mixed),
                                                    ("bf16", bf16_gradients, "bf16 gradients",
                                                     paper))
             for ranks in (2, 4)]
    for ranks, precision, flags, label, table in cases:
        planned = plan(work, model, ranks, f"plan{ranks}-{label.replace(' ', '-')}", precision,
                       flags)
        for zero, formula in table.items():
            entry = next(l for l in planned["layouts"]
                         if l["mesh"] == f"dp={ranks}" and l["zero"] == zero
                         and l["microbatches"] == 1 and l["recompute"] == "none")
            expected, got = formula(ranks), entry["model_state_bytes"]
            print(f"dp={ranks} zero={zero} {label}: model state {got} bytes, "
                  f"formula {expected:.0f}")
            if not expected <= got <= expected * 1.005 + 1024:
                problems.append(f"dp={ranks} zero={zero} {label}: {got} bytes, "
                                f"formula {expected:.0f}")

    # Step times against the documented model, from each layout's plan.json:
    # on the device file (compute scales 1), and on this machine measured.
    for precision in ("fp32", "bf16"):
        problems += step_time_problems(work, model, precision)
    problems += step_time_problems(work, model, "fp32", "cpu")

    # The predicted peak against the measured one, on layouts that run here.
    planned = {"fp32": plan(work, model, 2, "plan2-fp32"),
               "bf16": plan(work, model, 2, "plan2-bf16", "bf16"),
               "bf16 gradients": plan(work, model, 2, "plan2-bf16-grads", "bf16", bf16_gradients)}
    rng = np.random.default_rng(0)
    np.save(os.path.join(work, "x.npy"), rng.standard_normal((64, 128)).astype(np.float32))
    np.save(os.path.join(work, "labels.npy"), rng.integers(0, 10, 64))
    data = ["--data", f"x={work}/x.npy,labels={work}/labels.npy"]
    for precision, flags in (
            ("fp32", "--mesh dp=2"), ("fp32", "--mesh dp=2 --zero 3"),
            ("fp32", "--mesh pp=2 --grad-accum 2 --schedule 1f1b"),
            ("fp32", "--mesh pp=2 --grad-accum 2 --schedule interleaved --virtual-stages 2"),
            ("fp32", "--mesh dp=2 --zero 1 --grad-accum 2"),
            ("bf16", "--mesh dp=2 --zero 1 --grad-accum 2"), ("bf16", "--mesh dp=2 --zero 2"),
            ("bf16 gradients", "--mesh dp=2 --zero 1 --grad-accum 2")):
        layout = next(l for l in planned[precision]["layouts"] if l["flags"] == flags)
        extra = bf16_gradients if precision == "bf16 gradients" else []
        out, stages = compile_layout(work, model, dict(layout, flags=" ".join([flags, *extra])),
                                     "run", emit="program", precision=precision.split()[0])
        flags += f" ({precision})"
        log = os.path.join(work, "metrics.json")
        subprocess.run(["cleave", "run", "-n", "2", out, *data, "--steps", "2", "--quiet",
                        "--log-json", log], check=True)
        measured = json.load(open(log))["peak_bytes_allocated"]
        peaks = rank_peaks(layout, stages)
        print(f"{flags}: predicted peak {peaks[0]}, measured {measured}")
        if measured != peaks[0]:
            problems.append(f"{flags}: predicted peak {peaks[0]}, measured {measured}")
        if layout["predicted_peak_bytes"] != max(peaks):
            problems.append(f"{flags}: cleave plan says {layout['predicted_peak_bytes']}, "
                            f"the ranks' plan.json {peaks}")

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main(sys.argv[1])
