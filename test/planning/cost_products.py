# plan.json's cost.products: the matrix products of a training step as the
# CPU kernels pose them, against the shapes worked out from the model.
#   - test/models/export_mlp.py's MLP (batch 8, 32 -> 64 -> 64 -> 10, PyTorch's
#     Linear layers y = x W^T + b): the forward's three products (W read
#     transposed, the bias added as they are written), the input gradients
#     dx = dy W of the two layers above the first, and the weight gradients
#     dW = dy^T x, which write their accumulators on a step's first
#     microbatch (beta 0: one microbatch a step) and add to them on the others
#     (beta 1: --grad-accum 2); on dp=2 (the global batch 16) each rank's are
#     those of its 8 samples;
#   - for the MLP and the GPT-style model (whose attention multiplies
#     batches of matrices), each function's listed products' FLOPs (2 batch
#     m n k a call) equal its product_flops, so every product is listed once
#     with its calls;
#   - the GPT's attention products (16 x 16 x 16: seq 16, head dim 16) are
#     each one batched product over its batch x heads = 4 matrices, and
#     nothing else is batched;
#   - with --target cuda, none are listed;
#   - the MLP on pp=2 (--grad-accum 2): each stage's forward and backward
#     count one message each (the stage boundary's activation, then its
#     gradient: 8 x 64 f32, 2,048 bytes), its update none.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))


def compiled(work, exporter, name, flags):
    model = os.path.join(work, f"{exporter}.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable, os.path.join(HERE, "..", "models", f"{exporter}.py"),
                        model], check=True)
    out = os.path.join(work, name)
    subprocess.run(["cleave", "compile", model, "-o", out, "--train", "--optimizer", "adam",
                    "--emit", "plan", *flags], check=True)
    return json.load(open(os.path.join(out, "plan.json")))


def shapes(cost):
    return sorted((p["m"], p["n"], p["k"], p["trans_a"], p["trans_b"], p["beta"], p["bias"],
                   p["calls"]) for p in cost["products"])


def mlp_products(batch, beta):
    """(m, n, k, trans_a, trans_b, beta, bias, calls) of each product, the
    weight gradients' with `beta`."""
    layers = [(32, 64), (64, 64), (64, 10)]  # (in, out)
    expected = [(batch, out, inp, False, True, 0.0, True, 1) for inp, out in layers]
    expected += [(batch, inp, out, False, False, 0.0, False, 1) for inp, out in layers[1:]]
    expected += [(out, inp, batch, True, False, beta, False, 1) for inp, out in layers]
    return sorted(expected)


def main(work):
    problems = []
    for flags, batch, beta in (([], 8, 0.0), (["--mesh", "dp=2", "--batch-size", "16"], 8, 0.0),
                               (["--grad-accum", "2", "--batch-size", "16"], 8, 1.0)):
        plan = compiled(work, "export_mlp", "mlp-" + "-".join(flags[:2]).replace("=", ""), flags)
        step = next(c for c in plan["cost"] if c["function"] == "forward")
        if shapes(step) != mlp_products(batch, beta):
            problems.append(f"mlp {flags}: products {shapes(step)}, "
                            f"expected {mlp_products(batch, beta)}")
        print(f"mlp {' '.join(flags) or 'one device'}: {len(step['products'])} products")
    for exporter in ("export_mlp", "export_gpt"):
        plan = compiled(work, exporter, f"{exporter}-flops", [])
        for cost in plan["cost"]:
            listed = sum(2 * p["batch"] * p["m"] * p["n"] * p["k"] * p["calls"]
                         for p in cost["products"])
            if listed != cost["product_flops"] + cost["low_precision_product_flops"]:
                problems.append(f"{exporter} {cost['function']}: listed products {listed} FLOPs, "
                                f"product_flops {cost['product_flops']}")
        calls = max(p["calls"] for c in plan["cost"] for p in c["products"])
        print(f"{exporter}: listed FLOPs checked, a product runs at most {calls} times a call")
        attention = [(p["m"], p["n"], p["k"]) == (16, 16, 16) for c in plan["cost"]
                     for p in c["products"]]
        batched = [p["batch"] > 1 for c in plan["cost"] for p in c["products"]]
        batches = {p["batch"] for c in plan["cost"] for p in c["products"] if p["batch"] > 1}
        if batched != attention or (exporter == "export_gpt") != any(attention) or \
                batches - {4}:
            problems.append(f"{exporter}: batched products {batched}, attention's {attention}, "
                            f"batches {batches} (expected 4)")
        print(f"{exporter}: {sum(batched)} batched products")
    out = os.path.join(work, "mlp-pp2")
    subprocess.run(["cleave", "compile", os.path.join(work, "export_mlp.onnx"), "-o", out,
                    "--train", "--optimizer", "adam", "--emit", "plan", "--mesh", "pp=2",
                    "--grad-accum", "2"], check=True)
    for s in range(2):
        stage = json.load(open(os.path.join(out, f"stage{s}", "plan.json")))
        messages = {c["function"]: (c["messages"], c["message_bytes"]) for c in stage["cost"]}
        expected = {"forward": (1, 2048), "backward": (1, 2048), "apply": (0, 0)}
        if messages != expected:
            problems.append(f"mlp pp=2 stage {s}: messages {messages}, expected {expected}")
    print("mlp pp=2: each stage's messages checked")
    cuda = compiled(work, "export_mlp", "mlp-cuda", ["--target", "cuda"])
    if any(c["products"] for c in cuda["cost"]):
        problems.append("--target cuda: products listed")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main(sys.argv[1])
