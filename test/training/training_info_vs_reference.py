# A model whose training_info defines the step trains as that algorithm says:
# the MLP of test/lib/training_info_models.py with Gradient + Adam, Momentum
# (standard and Nesterov) or Adagrad, with update_binding for the weights, the
# optimizer state and an int64 iteration counter T (T_new = T + 1), the state
# and T held in the main graph's initializers or the algorithm's. Each is
# compiled with `cleave compile --train`, trained STEPS steps on a fixed
# dataset in file order, and compared with a reference computed here: the
# loss and the gradients by PyTorch's autograd, the update by ONNX's own
# reference implementation of the optimizer node (onnx.reference evaluating a
# model of that one node), T counted in Python. Every step's loss must agree
# within 1e-5 relative, and the final weights and optimizer state within 1e-5
# of their largest element; T must be exactly its start + STEPS. Also:
# plan.json's training section (algorithm training_info, no learning-rate or
# step input, the loss), the progress lines without a learning rate, the
# loss living in the algorithm (with its labels input), and --save-onnx
# writing the trained weights, state and T back into the initializers.
# A model with two TrainingInfoProtos runs them in order, the second on the
# main graph evaluated with the first one's updates (onnx.proto: executing
# the algorithms in order, each followed by its update_binding, is one step).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import training_info_models as tim

STEPS = 5
BATCH = 4
SAMPLES = 2 * BATCH  # file order wraps around after two steps


def reference_update(optimizer, r, t, xs, gs, states):
    """One update by onnx.reference's implementation of the optimizer node:
    returns the new weights and the new state, slot by slot."""
    spec = tim.OPTIMIZERS[optimizer]
    n = len(xs)
    names = ["R", "T"] + [f"X{i}" for i in range(n)] + [f"G{i}" for i in range(n)]
    feeds = {"R": np.array(r, np.float32), "T": np.array(t, np.int64)}
    for i in range(n):
        feeds[f"X{i}"], feeds[f"G{i}"] = xs[i], gs[i]
    for slot, values in zip(spec["slots"], states):
        for i in range(n):
            names.append(f"{slot}{i}")
            feeds[f"{slot}{i}"] = values[i]
    outputs = [f"X{i}_new" for i in range(n)]
    outputs += [f"{slot}{i}_new" for slot in spec["slots"] for i in range(n)]
    node = helper.make_node(tim.OP_TYPE[optimizer], names, outputs, domain=tim.TRAINING,
                            **spec["attrs"])
    graph = helper.make_graph(
        [node], "update",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                       list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, tim.F32, None) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(tim.TRAINING, 1)])
    results = ReferenceEvaluator(model).run(None, feeds)
    new_xs = [np.asarray(v, np.float32) for v in results[:n]]
    new_states = [[np.asarray(v, np.float32) for v in results[n * (k + 1):n * (k + 2)]]
                  for k in range(len(spec["slots"]))]
    return new_xs, new_states


def loss_and_grads(weights, names, xb, lb):
    """The mean cross entropy of the MLP with `weights` on one batch, and its
    gradients for `names`, by PyTorch's autograd."""
    params = {n: torch.tensor(weights[n], requires_grad=n in names) for n in tim.WEIGHTS}
    logits = torch.relu(xb @ params["W1"] + params["b1"]) @ params["W2"] + params["b2"]
    loss = torch.nn.functional.cross_entropy(logits, lb)
    loss.backward()
    return float(loss), [params[n].grad.numpy() for n in names]


def batches(x, labels):
    for step in range(STEPS):
        start = (step * BATCH) % SAMPLES
        yield torch.from_numpy(x[start:start + BATCH]), torch.from_numpy(labels[start:start + BATCH])


def reference_run(optimizer, initial, x, labels):
    spec = tim.OPTIMIZERS[optimizer]
    weights = {n: initial[n].copy() for n in tim.WEIGHTS}
    states = [[initial[f"{slot}_{n}"].copy() for n in tim.WEIGHTS] for slot in spec["slots"]]
    t = int(initial["T"])
    losses = []
    for xb, lb in batches(x, labels):
        loss, grads = loss_and_grads(weights, tim.WEIGHTS, xb, lb)
        losses.append(loss)
        new, states = reference_update(optimizer, float(initial["R"]), t,
                                       [weights[n] for n in tim.WEIGHTS], grads, states)
        weights = dict(zip(tim.WEIGHTS, new))
        t += 1
    final = dict(weights)
    for slot, values in zip(spec["slots"], states):
        final.update({f"{slot}_{n}": v for n, v in zip(tim.WEIGHTS, values)})
    final["T"] = np.array(t, np.int64)
    return losses, final


def reference_two_algorithms(initial, x, labels):
    """tim.two_algorithms: Momentum on the first layer, then Adagrad on the
    second at the loss the updated first layer gives; T counts once a step."""
    weights = {n: initial[n].copy() for n in tim.WEIGHTS}
    state = {n: initial[n].copy() for n in ("V_W1", "V_b1", "H_W2", "H_b2")}
    t = int(initial["T"])
    losses = []
    for xb, lb in batches(x, labels):
        for optimizer, names, rate, slot in (("momentum", ["W1", "b1"], "R0", "V"),
                                             ("adagrad", ["W2", "b2"], "R1", "H")):
            loss, grads = loss_and_grads(weights, names, xb, lb)
            if optimizer == "momentum":
                losses.append(loss)  # the graph's loss, before any update
            new, (slots,) = reference_update(optimizer, float(initial[rate]), t,
                                             [weights[n] for n in names], grads,
                                             [[state[f"{slot}_{n}"] for n in names]])
            weights.update(zip(names, new))
            state.update({f"{slot}_{n}": v for n, v in zip(names, slots)})
        t += 1
    return losses, {**weights, **state, "T": np.array(t, np.int64)}


def stored(plan, weights_bin):
    """Every parameter and state tensor of weights.bin by name."""
    blob = np.fromfile(weights_bin, dtype=np.uint8)
    values = {}
    for entry in plan["parameters"] + plan["state"]:
        dtype = {"f32": np.float32, "i64": np.int64}[entry["dtype"]]
        raw = blob[entry["offset"]:entry["offset"] + entry["bytes"]]
        values[entry["name"]] = raw.view(dtype).reshape(entry["shape"])
    return values


def check(workdir, name, optimizer, problems, save_onnx=False, **build):
    if optimizer == "two_algorithms":
        model, initial = tim.two_algorithms(batch=BATCH)
    else:
        model, initial = tim.mlp(optimizer, batch=BATCH, **build)
    path = os.path.join(workdir, f"{name}.onnx")
    onnx.save(model, path)
    x, labels = tim.dataset(SAMPLES)
    np.save(os.path.join(workdir, "x.npy"), x)
    np.save(os.path.join(workdir, "labels.npy"), labels)
    out = os.path.join(workdir, name)
    subprocess.run(["cleave", "compile", path, "-o", out, "--train"], check=True)
    plan = json.load(open(os.path.join(out, "plan.json")))
    training = plan["training"]
    if training.get("algorithm") != "training_info" or training.get("loss") != "loss" or \
            training.get("grad_accum") != 1 or "lr_input" in training or \
            "step_input" in training or sorted(training["data_inputs"]) != ["labels", "x"] or \
            sorted(i["name"] for i in plan["inputs"]) != ["labels", "x"]:
        problems.append(f"{name}: plan.json training section {training}, inputs "
                        f"{[i['name'] for i in plan['inputs']]}")
    # The state starts at the initializers' values, T included.
    before = stored(plan, os.path.join(out, "weights.bin"))
    for key, value in before.items():
        if not np.array_equal(value, initial[key]):
            problems.append(f"{name}: weights.bin holds {key} = {value}, not its initializer")

    results = os.path.join(workdir, f"{name}.results")
    os.makedirs(results, exist_ok=True)
    metrics = os.path.join(workdir, f"{name}.json")
    command = ["cleave", "run", out, "--data", f"x={workdir}/x.npy",
               "--data", f"labels={workdir}/labels.npy", "--steps", str(STEPS), "--no-shuffle",
               "--log-json", metrics, "--output-dir", results]
    trained_onnx = os.path.join(workdir, f"{name}.trained.onnx")
    if save_onnx:
        command += ["--save-onnx", trained_onnx]
    run = subprocess.run(command, check=True, stderr=subprocess.PIPE, text=True)
    progress = [line for line in run.stderr.splitlines() if line.startswith("step ")]
    if len(progress) != STEPS or any(" lr " in line for line in progress):
        problems.append(f"{name}: progress lines {progress}")
    log = json.load(open(metrics))
    ours = [s["loss"] for s in log["steps"]]
    if any("lr" in s for s in log["steps"]):
        problems.append(f"{name}: the metrics log a learning rate: {log['steps'][0]}")

    if optimizer == "two_algorithms":
        theirs, final = reference_two_algorithms(initial, x, labels)
    else:
        theirs, final = reference_run(optimizer, initial, x, labels)
    if len(ours) != STEPS:
        problems.append(f"{name}: {len(ours)} steps logged, expected {STEPS}")
    for step, (a, b) in enumerate(zip(ours, theirs), start=1):
        if abs(a - b) > 1e-5 * abs(b):
            problems.append(f"{name}: step {step}: loss {a:.8f}, reference {b:.8f}")
            break
    after = stored(plan, os.path.join(results, "weights.bin"))
    for key, expected in final.items():
        got = after[key]
        if expected.dtype == np.int64:
            if not np.array_equal(got, expected):
                problems.append(f"{name}: final {key} = {got}, reference {expected}")
            continue
        error = np.abs(got - expected).max()
        if error > 1e-5 * max(np.abs(expected).max(), 1e-6):
            problems.append(f"{name}: final {key} differs by {error:.2e}")
    if not os.path.exists(os.path.join(results, "logits.npy")):
        problems.append(f"{name}: the last step's logits were not written")
    if save_onnx:
        saved = onnx.load(trained_onnx)
        initializers = {t.name: numpy_helper.to_array(t) for t in saved.graph.initializer}
        for info in saved.training_info:
            initializers.update({t.name: numpy_helper.to_array(t)
                                 for t in info.algorithm.initializer})
        for key, value in after.items():
            if not np.array_equal(initializers[key], value):
                problems.append(f"{name}: --save-onnx wrote {key} = {initializers[key]}")
    print(f"{name}: losses {ours[0]:.6f} -> {ours[-1]:.6f} "
          f"(reference {theirs[0]:.6f} -> {theirs[-1]:.6f})")


def main():
    workdir = sys.argv[1]
    problems = []
    check(workdir, "adam", "adam", problems, save_onnx=True, state_in="algorithm",
          counter_in="graph")
    check(workdir, "momentum", "momentum", problems, state_in="graph", counter_in="algorithm")
    check(workdir, "nesterov", "nesterov", problems, state_in="graph", counter_in="graph")
    check(workdir, "adagrad", "adagrad", problems, save_onnx=True, state_in="algorithm",
          counter_in="algorithm")
    check(workdir, "adam_loss_in_algorithm", "adam", problems, loss_in="algorithm")
    check(workdir, "two_algorithms", "two_algorithms", problems, save_onnx=True)
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
