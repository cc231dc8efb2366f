# plan.json's predicted peak is what the program allocates: the weights blob,
# the arena, the inputs and the largest scratch a kernel allocates for one
# call (a convolution's im2col tile). The runtime counts every allocation it
# makes for the program (runtime/Allocations.h) and reports the peak; for
# the MLP's forward (no scratch; its gemms' weights kept in oneDNN's layout,
# packed_weight_bytes), the CNN's forward (3x3 convolutions: scratch; their
# weights kept in oneDNN's layout too, at least as many bytes as the model
# holds for them) and the
# CNN's training step (the convolutions' adjoints too), and the first stage
# of the CNN on a gpipe pipeline of two stages (which keeps the stash of all
# four microbatches), and the first stage of the test GPT on the same
# pipeline without recomputation and with --recompute full (whose stash is
# smaller), the CNN's training step with --precision bf16 (bf16
# convolutions), and the MLP's training step with --precision bf16, both with
# oneDNN's bf16 products and with oneDNN held to AVX-512 without bf16
# instructions (the factors widened to f32 into scratch: ProductPrimitives.h),
# rank 0 of the GPT on tp=2 with --deterministic (whole weights gathered),
# and rank 0 of the GPT on an interleaved pipeline (pp=2, V=2: stages 0 and
# 2 in one process, the sum of their predictions but for their scratch and
# products' scratchpad, of which the largest counts once), and the GPT's
# training step compiled and run for 1 and for 2 threads (oneDNN sizes the
# products' scratchpads, which the runtime counts, for the threads), and
# rank 0 of a deep MLP (seven products, none over a sixth of the
# parameters) on dp=2 with --precision bf16, its gradients summed in f32,
# with f32 and with bf16 accumulators, and the training step of two
# convolutions of 4 spatial dims on 2 threads (the im2col kernels, whose
# products' oneDNN scratchpads are predicted too),
# the measured peak equals the prediction byte for byte,
# and the process's resident peak (getrusage, which also holds libraries and
# host copies) is above it.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rank_memory import rank_peak  # noqa: E402


def check(name, plan_dir, measured, problems, expect_scratch):
    memory = json.load(open(os.path.join(plan_dir, "plan.json")))["memory"]
    predicted, scratch = memory["predicted_peak_bytes"], memory["scratch_bytes"]
    scratchpad = memory["product_scratchpad_bytes"]
    if measured["peak_bytes_allocated"] != predicted:
        problems.append(f"{name}: measured {measured['peak_bytes_allocated']} bytes, "
                        f"predicted {predicted}")
    if expect_scratch is not None and (scratch > 0) != expect_scratch:
        problems.append(f"{name}: scratch_bytes {scratch}")
    if measured["process_peak_rss_bytes"] < predicted:
        problems.append(f"{name}: process peak {measured['process_peak_rss_bytes']} "
                        f"below the program's {predicted}")
    print(f"{name}: predicted {predicted} (scratch {scratch}, products' scratchpad "
          f"{scratchpad}), measured {measured['peak_bytes_allocated']}, process "
          f"{measured['process_peak_rss_bytes']}")
    return memory


def pipeline_stage0(work, label, model, shape_flags, data, flags, name, expect_scratch, problems):
    """Compiles `model` on a gpipe pipeline of two stages with four
    microbatches, trains two steps and checks stage 0's peak; returns its
    stash bytes."""
    out = os.path.join(work, label)
    subprocess.run(["cleave", "compile", model, "-o", out, "--train", *shape_flags,
                    "--grad-accum", "4", "--mesh", "pp=2", "--schedule", "gpipe", *flags],
                   check=True)
    log = f"{work}/log-{label}.json"
    subprocess.run(["cleave", "run", "-n", "2", out, "--data", data, "--steps", "2",
                    "--log-json", log], check=True, stderr=subprocess.DEVNULL)
    stage0 = os.path.join(out, "stage0")
    plan = json.load(open(os.path.join(stage0, "plan.json")))
    stash = plan["memory"]["stash_bytes"]
    if plan["training"]["pipeline"]["in_flight"] != 4 or stash <= 0:
        problems.append(f"{name}: holds {plan['training']['pipeline']['in_flight']} "
                        f"microbatches, stash {stash} bytes")
    check(name, stage0, json.load(open(log)), problems, expect_scratch)
    return stash


def deep_mlp(path, layers=6, width=128, classes=10):
    """An MLP of `layers` width x width products with ReLUs and a classifier
    (dynamic batch), its logits the output."""
    rng = np.random.default_rng(1)
    nodes, weights, x = [], [], "x"
    for i, out in enumerate([width] * layers + [classes]):
        w = (rng.standard_normal((out, width)) / np.sqrt(width)).astype(np.float32)
        weights += [onnx.numpy_helper.from_array(w, f"w{i}"),
                    onnx.numpy_helper.from_array(np.zeros(out, np.float32), f"b{i}")]
        y = "logits" if i == layers else f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [y], transB=1))
        if i < layers:
            nodes.append(helper.make_node("Relu", [y], [f"r{i}"]))
            y = f"r{i}"
        x = y
    graph = helper.make_graph(
        nodes, "deep_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def gradient_sums_of_bf16_accumulators(work, rng, problems):
    """With --precision bf16 on dp=2, gradients summed in f32: bf16
    accumulators keep 2 bytes a parameter fewer than f32 ones, and @apply
    sums each one's widened f32 copy just before its update
    (cleave-sink-widened-sums), in place (no copy): one parameter's f32 sum
    at a time, a sixth of the 2 bytes a parameter saved in the deep MLP
    (holding every sum until the updates, the peak was higher). A weight of
    more than a quarter of the parameters is summed and updated a quarter at
    a time: the MLP of one 512 x 512 layer (98% of its parameters) peaked
    above its f32 accumulators when its whole f32 sum was held. Its chunks
    compute what the whole sum does: the same losses and parameters, bit for
    bit, as with a gradient clip too large to act (min(1, c / norm) is 1),
    whose norm reads every sum, which therefore stays whole."""
    np.save(f"{work}/deep-labels.npy", rng.integers(0, 10, 4).astype(np.int64))
    for model_name, layers, width in (("deep-mlp", 6, 128), ("wide-mlp", 1, 512)):
        model = os.path.join(work, f"{model_name}.onnx")
        deep_mlp(model, layers, width)
        np.save(f"{work}/{model_name}-x.npy", rng.standard_normal((4, width)).astype(np.float32))
        runs = {}
        for label, flags in (("fp32", ["--grad-accum-dtype", "fp32"]),
                             ("bf16", ["--grad-accum-dtype", "bf16"]),
                             ("bf16-whole", ["--grad-accum-dtype", "bf16",
                                             "--clip-grad-norm", "1e30"])):
            if label == "bf16-whole" and layers > 1:
                continue
            out = os.path.join(work, f"{model_name}-dp2-{label}")
            subprocess.run(["cleave", "compile", model, "-o", out, "--train", "--loss",
                            "cross_entropy:logits,labels", "--optimizer", "adam", "--lr", "1e-4",
                            "--precision", "bf16", *flags, "--batch-size", "4", "--mesh", "dp=2"],
                           check=True)
            log = f"{out}.json"
            subprocess.run(["cleave", "run", "-n", "2", out, "--data",
                            f"x={work}/{model_name}-x.npy,labels={work}/deep-labels.npy",
                            "--steps", "4", "--log-json", log, "--save-onnx", f"{out}.onnx"],
                           check=True, stderr=subprocess.DEVNULL)
            measured = json.load(open(log))
            if label != "bf16-whole":
                check(f"{model_name} dp=2 bf16, f32 sums, {label} accumulators, rank 0", out,
                      measured, problems, None)
            trained = {t.name: onnx.numpy_helper.to_array(t)
                       for t in onnx.load(f"{out}.onnx").graph.initializer}
            runs[label] = ([step["loss"] for step in measured["steps"]], trained,
                           measured["peak_bytes_allocated"])
        if not runs["bf16"][2] < runs["fp32"][2]:
            problems.append(f"{model_name} dp=2, f32 sums: bf16 accumulators peak at "
                            f"{runs['bf16'][2]} bytes, f32 ones at {runs['fp32'][2]}")
        if "bf16-whole" in runs:
            chunked, whole = runs["bf16"], runs["bf16-whole"]
            if chunked[0] != whole[0] or any(not np.array_equal(chunked[1][n], whole[1][n])
                                             for n in whole[1]):
                problems.append(f"{model_name} dp=2, bf16 accumulators: losses {chunked[0]} "
                                f"summed in chunks, {whole[0]} whole, or the parameters differ")
            if not chunked[0][0] > chunked[0][-1] > 0:
                problems.append(f"{model_name}: losses {chunked[0]} do not fall")


def im2col_convolutions(work, rng, problems):
    """Two convolutions of 4 spatial dims (which oneDNN does not take: the
    im2col kernels) trained on 2 threads: their products' oneDNN scratchpad
    (each tile's product: forward, input gradient and weight gradient) is
    predicted, and the measured peak equals the prediction."""
    weights = [onnx.numpy_helper.from_array(
        (rng.standard_normal(shape) * 0.1).astype(np.float32), name)
        for name, shape in (("w1", (6, 3, 3, 3, 3, 3)), ("w2", (4, 6, 3, 3, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 8),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1] * 8),
             helper.make_node("Mul", ["c2", "c2"], ["squares"]),
             helper.make_node("ReduceMean", ["squares"], ["loss"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "conv4d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 5, 5, 5])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], weights)
    model = os.path.join(work, "conv4d.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    np.save(f"{work}/conv4d-x.npy", rng.standard_normal((2, 3, 5, 5, 5, 5)).astype(np.float32))
    out = os.path.join(work, "conv4d")
    subprocess.run(["cleave", "compile", model, "-o", out, "--train", "--threads", "2"],
                   check=True)
    log = f"{out}.json"
    subprocess.run(["cleave", "run", out, "--data", f"x={work}/conv4d-x.npy", "--steps", "2",
                    "--threads", "2", "--log-json", log], check=True, stderr=subprocess.DEVNULL)
    memory = check("conv4d training step (im2col), 2 threads", out, json.load(open(log)),
                   problems, True)
    if memory["product_scratchpad_bytes"] <= 0:
        problems.append(f"conv4d: product_scratchpad_bytes {memory['product_scratchpad_bytes']}")


def main():
    work = sys.argv[1]
    problems = []
    mlp = os.path.join(HERE, "..", "..", "examples", "mlp", "model.onnx")
    cnn = os.path.join(work, "cnn.onnx")
    cnn_train = os.path.join(work, "cnn_train.onnx")
    subprocess.run([sys.executable, os.path.join(MODELS, "export_cnn.py"), cnn], check=True)
    subprocess.run([sys.executable, os.path.join(MODELS, "export_cnn_train.py"), cnn_train],
                   check=True)
    rng = np.random.default_rng(0)

    for name, model, x_shape, expect_scratch in [("mlp", mlp, (8, 32), False),
                                                 ("cnn", cnn, (4, 3, 16, 16), True)]:
        out = os.path.join(work, name)
        subprocess.run(["cleave", "compile", model, "-o", out], check=True)
        np.save(f"{work}/{name}-x.npy", rng.standard_normal(x_shape).astype(np.float32))
        np.save(f"{work}/{name}-labels.npy", np.zeros(x_shape[0], np.int64))
        stats = subprocess.run(["cleave", "run", out, "--input", f"x={work}/{name}-x.npy",
                                "--input", f"labels={work}/{name}-labels.npy", "--stats"],
                               check=True, capture_output=True, text=True).stdout
        check(name, out, json.loads(stats), problems, expect_scratch)
        # A forward keeps its gemms' and convolutions' weights in oneDNN's
        # layout: counted.
        packed = json.load(open(os.path.join(out, "plan.json")))["memory"]["packed_weight_bytes"]
        graph = onnx.load(model).graph
        initializers = {t.name: t for t in graph.initializer}
        conv_weights = sum(onnx.numpy_helper.to_array(initializers[n.input[1]]).nbytes
                           for n in graph.node if n.op_type == "Conv")
        if packed <= conv_weights or (name == "cnn") != (conv_weights > 0):
            problems.append(f"{name}: packed_weight_bytes {packed}, convolution weights "
                            f"{conv_weights} bytes")

    # The CNN's training step in f32, and in bf16, whose convolutions take
    # bf16 factors (oneDNN's bf16 primitives, with its bf16 instructions or
    # held below them: other layouts, other scratch).
    np.save(f"{work}/train-x.npy", rng.standard_normal((8, 3, 15, 15)).astype(np.float32))
    np.save(f"{work}/train-labels.npy", rng.integers(0, 10, 8).astype(np.int64))
    for label, flags, isa in (("", [], {}), (", bf16", ["--precision", "bf16"], {}),
                              (", bf16 without bf16 instructions", ["--precision", "bf16"],
                               {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"})):
        out = os.path.join(work, f"cnn-train{len(flags)}{len(isa)}")
        env = dict(os.environ, **isa)
        subprocess.run(["cleave", "compile", cnn_train, "-o", out, "--train", "--optimizer",
                        "adam", "--batch-size", "8", "--grad-accum", "2", *flags], check=True,
                       env=env)
        log = f"{out}.json"
        subprocess.run(["cleave", "run", out, "--data",
                        f"x={work}/train-x.npy,labels={work}/train-labels.npy", "--steps", "2",
                        "--log-json", log], check=True, env=env, stderr=subprocess.DEVNULL)
        check("cnn training step" + label, out, json.load(open(log)), problems, True)

    # bf16 products: no scratch where this CPU runs them as bf16 primitives,
    # the widened factors' where it does not (either may hold here) and
    # without bf16 instructions; with the gradient
    # accumulators in bf16 too, which the weights' gradient products add
    # into as they write bf16 (widened: their f32 sums in scratch): the
    # arena is then not grown by the accumulation, and the peak less the
    # scratch is below the f32 accumulators'.
    np.save(f"{work}/mlp-train-x.npy", rng.standard_normal((16, 32)).astype(np.float32))
    np.save(f"{work}/mlp-train-labels.npy", rng.integers(0, 10, 16).astype(np.int64))
    for label, isa, expect_scratch in (("default", {}, None),
                                       ("widened", {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, True)):
        peaks = {}
        for accumulators in ("fp32", "bf16"):
            out = os.path.join(work, f"mlp-bf16-{label}-{accumulators}")
            env = dict(os.environ, **isa)
            subprocess.run(["cleave", "compile", mlp, "-o", out, "--train", "--precision", "bf16",
                            "--grad-accum-dtype", accumulators, "--batch-size", "16",
                            "--grad-accum", "2"], check=True, env=env)
            log = f"{out}.json"
            subprocess.run(["cleave", "run", out, "--data",
                            f"x={work}/mlp-train-x.npy,labels={work}/mlp-train-labels.npy",
                            "--steps", "2", "--log-json", log], check=True, env=env,
                           stderr=subprocess.DEVNULL)
            peaks[accumulators] = check(
                f"mlp training step, bf16 products ({label}), {accumulators} accumulators", out,
                json.load(open(log)), problems, expect_scratch)
        arena = {a: m["activation_bytes"] for a, m in peaks.items()}
        rest = {a: m["predicted_peak_bytes"] - m["scratch_bytes"] for a, m in peaks.items()}
        if arena["bf16"] > arena["fp32"] or rest["bf16"] >= rest["fp32"]:
            problems.append(f"bf16 accumulators ({label}): arena {arena['bf16']}, peak less "
                            f"scratch {rest['bf16']} bytes; f32 accumulators' {arena['fp32']}, "
                            f"{rest['fp32']}")

    # The first stage of a gpipe pipeline keeps all four microbatches' stash.
    np.save(f"{work}/pp-x.npy", rng.standard_normal((16, 3, 15, 15)).astype(np.float32))
    np.save(f"{work}/pp-labels.npy", rng.integers(0, 10, 16).astype(np.int64))
    pipeline_stage0(work, "cnn-pp2", cnn_train, ["--batch-size", "16"],
                    f"x={work}/pp-x.npy,labels={work}/pp-labels.npy", [],
                    "cnn pp=2 gpipe, stage 0", True, problems)

    # The GPT's first stage with --recompute full keeps a smaller stash.
    gpt = os.path.join(work, "gpt.onnx")
    subprocess.run([sys.executable, os.path.join(MODELS, "export_gpt.py"), gpt], check=True)
    np.save(f"{work}/idx.npy", rng.integers(0, 64, (16, 16)).astype(np.int64))
    np.save(f"{work}/targets.npy", rng.integers(0, 64, (16, 16)).astype(np.int64))
    stash = {}
    for recompute in ("none", "full"):
        stash[recompute] = pipeline_stage0(
            work, f"gpt-pp2-{recompute}", gpt, [], f"idx={work}/idx.npy,targets={work}/targets.npy",
            ["--recompute", recompute], f"gpt pp=2 gpipe --recompute {recompute}, stage 0", False,
            problems)
    if not stash["full"] < stash["none"]:
        problems.append(f"gpt pp=2 gpipe: stash {stash['full']} bytes with --recompute full, "
                        f"not below {stash['none']}")

    # A rank of an interleaved pipeline holds its two stages' programs: its
    # peak is the sum of theirs (each one's scratch is its calls', released
    # after each: the largest of them counts once).
    out = os.path.join(work, "gpt-interleaved")
    subprocess.run(["cleave", "compile", gpt, "-o", out, "--train", "--grad-accum", "4",
                    "--mesh", "pp=2", "--schedule", "interleaved", "--virtual-stages", "2"],
                   check=True)
    log = f"{work}/log-gpt-interleaved.json"
    subprocess.run(["cleave", "run", "-n", "2", out, "--data",
                    f"idx={work}/idx.npy,targets={work}/targets.npy", "--steps", "2",
                    "--log-json", log], check=True, stderr=subprocess.DEVNULL)
    memories = [json.load(open(os.path.join(out, f"stage{s}", "plan.json")))["memory"]
                for s in (0, 2)]
    predicted = rank_peak(memories)
    measured = json.load(open(log))["peak_bytes_allocated"]
    if measured != predicted:
        problems.append(f"gpt interleaved, rank 0: measured {measured} bytes, predicted "
                        f"{predicted} (stages 0 and 2)")
    print(f"gpt interleaved, rank 0 (stages 0 and 2): predicted {predicted}, measured {measured}")

    # tp=2 with --deterministic: each rank gathers a row-parallel layer's
    # whole weight and activation (cleave-gather-split-products), which the
    # memory plan places like any value.
    out = os.path.join(work, "gpt-tp2-deterministic")
    subprocess.run(["cleave", "compile", gpt, "-o", out, "--train", "--mesh", "tp=2", "--plan",
                    os.path.join(HERE, "..", "..", "plans", "megatron-gpt.json"),
                    "--deterministic"], check=True)
    log = f"{out}.json"
    subprocess.run(["cleave", "run", "-n", "2", out, "--data",
                    f"idx={work}/idx.npy,targets={work}/targets.npy", "--steps", "2",
                    "--log-json", log], check=True, stderr=subprocess.DEVNULL)
    check("gpt tp=2 --deterministic, rank 0", out, json.load(open(log)), problems, None)

    # oneDNN sizes a product's scratchpad for the threads: the plan predicts
    # it for the threads it is compiled for, and some of the GPT's products
    # need one, so the count is not vacuous.
    scratchpads = {}
    for threads in ("1", "2"):
        out = os.path.join(work, f"gpt-threads{threads}")
        subprocess.run(["cleave", "compile", gpt, "-o", out, "--train", "--threads", threads],
                       check=True)
        log = f"{out}.json"
        subprocess.run(["cleave", "run", out, "--data",
                        f"idx={work}/idx.npy,targets={work}/targets.npy", "--steps", "2",
                        "--threads", threads, "--log-json", log], check=True,
                       stderr=subprocess.DEVNULL)
        memory = check(f"gpt training step, {threads} thread(s)", out, json.load(open(log)),
                       problems, None)
        if memory["threads"] != int(threads):
            problems.append(f"gpt, --threads {threads}: plan.json's memory.threads "
                            f"{memory['threads']}")
        scratchpads[threads] = memory["product_scratchpad_bytes"]
    if max(scratchpads.values()) == 0:
        problems.append("gpt training step: no product asked oneDNN for a scratchpad")

    gradient_sums_of_bf16_accumulators(work, rng, problems)
    im2col_convolutions(work, rng, problems)

    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
