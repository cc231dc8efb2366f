"""Models whose training step is their own: an MLP with a cross-entropy loss
and a TrainingInfoProto whose algorithm is Gradient, one optimizer of
ai.onnx.preview.training (Adam, Momentum or Adagrad) and an int64 iteration
counter T (T_new = T + 1), with update_binding for the weights, the optimizer
state and T (onnx.proto, TrainingInfoProto).

    model, initial = mlp(optimizer="adam")

`initial` holds every initializer's value by name, for a reference run.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
TRAINING = "ai.onnx.preview.training"
WEIGHTS = ["W1", "b1", "W2", "b2"]

# The optimizers: their node's attributes, the state slots each weight gets
# (in the optimizer's input order), the learning rate and the counter's start.
OPTIMIZERS = {
    "adam": dict(attrs=dict(alpha=0.8, beta=0.95, epsilon=1e-4, norm_coefficient=0.01,
                            norm_coefficient_post=0.001),
                 slots=["V", "H"], lr=0.05, t0=1),
    "momentum": dict(attrs=dict(alpha=0.9, beta=0.5, norm_coefficient=0.01, mode="standard"),
                     slots=["V"], lr=0.1, t0=0),
    "nesterov": dict(attrs=dict(alpha=0.8, beta=0.7, norm_coefficient=0.0, mode="nesterov"),
                     slots=["V"], lr=0.1, t0=0),
    "adagrad": dict(attrs=dict(epsilon=1e-5, decay_factor=0.1, norm_coefficient=0.02),
                    slots=["H"], lr=0.2, t0=0),
}
OP_TYPE = {"adam": "Adam", "momentum": "Momentum", "nesterov": "Momentum", "adagrad": "Adagrad"}


def weights(seed=0, hidden=5):
    rng = np.random.default_rng(seed)
    return {
        "W1": (rng.standard_normal((3, hidden)) * 0.5).astype(np.float32),
        "b1": (rng.standard_normal(hidden) * 0.1).astype(np.float32),
        "W2": (rng.standard_normal((hidden, 2)) * 0.5).astype(np.float32),
        "b2": np.zeros(2, np.float32),
    }


def mlp(optimizer="adam", batch=4, state_in="algorithm", counter_in="graph", hidden=5,
        seed=0, bindings=None, extra_outputs=(), loss_in="graph", check=True):
    """The MLP x[batch,3] -> logits[batch,2] with the mean
    SoftmaxCrossEntropyLoss against int64 labels[batch] (main graph outputs
    `loss` and `logits`), and one TrainingInfoProto. The optimizer state lives
    in the main graph's initializers or the algorithm's (`state_in`), and so
    does T (`counter_in`). `loss_in="algorithm"` moves the loss and the
    labels input into the algorithm (the main graph outputs logits only).
    `bindings` replaces the update_binding list (for error cases)."""
    spec = OPTIMIZERS[optimizer]
    w = weights(seed, hidden)
    initial = dict(w)
    state = {}
    for slot in spec["slots"]:
        for name in WEIGHTS:
            state[f"{slot}_{name}"] = np.zeros_like(w[name])
    counter = {"T": np.array(spec["t0"], np.int64)}
    constants = {"R": np.array(spec["lr"], np.float32), "one": np.array(1, np.int64)}
    initial.update(state)
    initial.update(counter)
    initial.update(constants)

    graph_init = dict(w)
    algo_init = dict(constants)
    (graph_init if state_in == "graph" else algo_init).update(state)
    (graph_init if counter_in == "graph" else algo_init).update(counter)

    loss_nodes = [helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                                   name="xent", reduction="mean")]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["xw1"], name="fc1"),
        helper.make_node("Add", ["xw1", "b1"], ["h1"], name="fc1_bias"),
        helper.make_node("Relu", ["h1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "W2"], ["hw2"], name="fc2"),
        helper.make_node("Add", ["hw2", "b2"], ["logits"], name="fc2_bias"),
    ]
    inputs = [helper.make_tensor_value_info("x", F32, [batch, 3])]
    labels = helper.make_tensor_value_info("labels", I64, [batch])
    outputs = [helper.make_tensor_value_info("logits", F32, [batch, 2])]
    algo_nodes, algo_inputs, algo_outputs = [], [], []
    if loss_in == "graph":
        nodes += loss_nodes
        inputs.append(labels)
        outputs.insert(0, helper.make_tensor_value_info("loss", F32, []))
    else:
        algo_nodes += loss_nodes
        algo_inputs.append(labels)
        algo_outputs.append(helper.make_tensor_value_info("loss", F32, []))
    graph = helper.make_graph(nodes, "mlp", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in graph_init.items()])

    grads = [f"G_{n}" for n in WEIGHTS]
    algo_nodes.append(helper.make_node("Gradient", list(WEIGHTS), grads, name="gradient",
                                       domain=TRAINING, xs=list(WEIGHTS), y="loss"))
    state_inputs = [f"{slot}_{n}" for slot in spec["slots"] for n in WEIGHTS]
    new_weights = [f"{n}_new" for n in WEIGHTS]
    new_state = [f"{s}_new" for s in state_inputs]
    algo_nodes.append(helper.make_node(OP_TYPE[optimizer],
                                       ["R", "T", *WEIGHTS, *grads, *state_inputs],
                                       new_weights + new_state, name="optimizer",
                                       domain=TRAINING, **spec["attrs"]))
    algo_nodes.append(helper.make_node("Add", ["T", "one"], ["T_new"], name="count"))
    for name in new_weights:
        algo_outputs.append(helper.make_tensor_value_info(name, F32, list(w[name[:-4]].shape)))
    for name in new_state:
        algo_outputs.append(
            helper.make_tensor_value_info(name, F32, list(state[name[:-4]].shape)))
    algo_outputs.append(helper.make_tensor_value_info("T_new", I64, []))
    for name, elem, shape in extra_outputs:
        algo_outputs.append(helper.make_tensor_value_info(name, elem, shape))
    algorithm = helper.make_graph(algo_nodes, "step", algo_inputs, algo_outputs,
                                  [numpy_helper.from_array(v, k) for k, v in algo_init.items()])

    if bindings is None:
        bindings = [(n, n + "_new") for n in WEIGHTS + state_inputs + ["T"]]
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algorithm)
    for key, value in bindings:
        entry = info.update_binding.add()
        entry.key, entry.value = key, value
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(TRAINING, 1)],
                              producer_name="cleave-tests")
    model.ir_version = 8
    model.training_info.append(info)
    if check:
        onnx.checker.check_model(model)
    return model, initial


def _algorithm(optimizer, xs, lr, suffix, count):
    """An algorithm graph: the gradient of `loss` for `xs`, one `optimizer`
    update of them with state initializers of its own, and T_new = T + 1
    when `count`. Returns the graph, its update_binding and initial state."""
    spec = OPTIMIZERS[optimizer]
    w = weights()
    grads = [f"G_{n}" for n in xs]
    state = {f"{slot}_{n}": np.zeros_like(w[n]) for slot in spec["slots"] for n in xs}
    constants = {f"R{suffix}": np.array(lr, np.float32)}
    nodes = [helper.make_node("Gradient", list(xs), grads, name=f"gradient{suffix}",
                              domain=TRAINING, xs=list(xs), y="loss"),
             helper.make_node(OP_TYPE[optimizer], [f"R{suffix}", "T", *xs, *grads, *state],
                              [f"{n}_new" for n in [*xs, *state]], name=f"optimizer{suffix}",
                              domain=TRAINING, **spec["attrs"])]
    values = {**{n: w[n] for n in xs}, **state}
    outputs = [helper.make_tensor_value_info(f"{n}_new", F32, list(v.shape))
               for n, v in values.items()]
    bindings = [(n, f"{n}_new") for n in values]
    if count:
        constants["one"] = np.array(1, np.int64)
        nodes.append(helper.make_node("Add", ["T", "one"], ["T_new"], name="count"))
        outputs.append(helper.make_tensor_value_info("T_new", I64, []))
        bindings.append(("T", "T_new"))
    graph = helper.make_graph(nodes, f"step{suffix}", [], outputs,
                              [numpy_helper.from_array(v, k)
                               for k, v in {**state, **constants}.items()])
    return graph, bindings, {**state, **constants}


def two_algorithms(batch=4):
    """The MLP with two TrainingInfoProtos: Momentum on the first layer, then
    Adagrad on the second (on the loss the updated first layer gives), which
    also counts T (from 1), an initializer of the main graph both read."""
    model, initial = mlp("adam", batch=batch)
    del model.training_info[:]
    for name in [n for n in initial if n[:2] in ("V_", "H_") or n in ("R", "one")]:
        del initial[name]
    for optimizer, xs, lr, suffix, count in (("momentum", ["W1", "b1"], 0.1, "0", False),
                                             ("adagrad", ["W2", "b2"], 0.2, "1", True)):
        graph, bindings, values = _algorithm(optimizer, xs, lr, suffix, count)
        info = model.training_info.add()
        info.algorithm.CopyFrom(graph)
        for key, value in bindings:
            entry = info.update_binding.add()
            entry.key, entry.value = key, value
        initial.update(values)
    onnx.checker.check_model(model)
    return model, initial


def swap():
    """x[4,1] -> loss = sum(x) / 4 + sum(A), with a training_info that swaps
    the initializers A = [1, 2] and B = [3, 4] every step through views
    (A <- Identity(B), B <- Identity(A)) and binds C to itself: the losses
    alternate between sum(x) / 4 + 3 and + 7."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["xmean"], keepdims=0),
             helper.make_node("ReduceSum", ["A"], ["asum"], keepdims=0),
             helper.make_node("Add", ["xmean", "asum"], ["loss"])]
    graph = helper.make_graph(
        nodes, "swap", [helper.make_tensor_value_info("x", F32, [4, 1])],
        [helper.make_tensor_value_info("loss", F32, [])],
        [numpy_helper.from_array(np.array(v, np.float32), k)
         for k, v in (("A", [1, 2]), ("B", [3, 4]), ("C", [5, 6]))])
    algorithm = helper.make_graph(
        [helper.make_node("Identity", ["B"], ["A_new"]),
         helper.make_node("Identity", ["A"], ["B_new"]),
         helper.make_node("Identity", ["C"], ["C_new"])],
        "step", [], [helper.make_tensor_value_info(n, F32, [2]) for n in ("A_new", "B_new",
                                                                          "C_new")])
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algorithm)
    for key in "ABC":
        entry = info.update_binding.add()
        entry.key, entry.value = key, key + "_new"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="cleave-tests")
    model.ir_version = 8
    model.training_info.append(info)
    onnx.checker.check_model(model)
    return model


def dataset(samples, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, 3)).astype(np.float32)
    labels = rng.integers(0, 2, samples).astype(np.int64)
    return x, labels


if __name__ == "__main__":
    # training_info_models.py model OPTIMIZER|swap OUT.onnx | data DIR SAMPLES
    import os
    import sys
    if sys.argv[1] == "model":
        onnx.save(swap() if sys.argv[2] == "swap" else mlp(sys.argv[2])[0], sys.argv[3])
    elif sys.argv[1] == "data":
        x, labels = dataset(int(sys.argv[3]))
        np.save(os.path.join(sys.argv[2], "x.npy"), x)
        np.save(os.path.join(sys.argv[2], "labels.npy"), labels)
    else:
        sys.exit("usage: training_info_models.py model OPTIMIZER OUT.onnx | data DIR SAMPLES")
