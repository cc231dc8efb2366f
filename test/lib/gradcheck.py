"""Gradient checks: cleave's reverse-mode rules against central finite
differences computed with ONNX's own reference evaluator (onnx.reference), in
float64.

A case is a small ONNX graph: `params` (float arrays, which become float
initializers, so cleave differentiates them), `constants` (integer arrays:
indices, labels, shapes) and `nodes` producing `outputs`. The harness appends
loss = sum_k ReduceSum(outputs[k] * r_k) with random r_k fed as inputs, so every
element of every output is weighted differently, compiles the model with
`cleave compile --gradients`, runs it, and compares each grad:<param> with
(L(p + eps) - L(p - eps)) / (2 eps) evaluated by onnx.reference on the same
graph with the parameters as inputs.

    cases = Cases()
    cases.add("relu", nodes=[helper.make_node("Relu", ["x"], ["y"])],
              params={"x": rng.standard_normal((2, 3))}, outputs=["y"])
    if __name__ == "__main__":
        cases.main()  # RUN: %python %s %t
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

# Central differences step: small for float64, larger where the reference
# computes in float32 (then rounding, not truncation, limits the accuracy).
EPSILON = {np.float64: 1e-6, np.float32: 3e-3}


def rng(seed=0):
    return np.random.default_rng(seed)


class Case:
    def __init__(self, name, nodes, params, outputs, constants=None, opset=17, dtype=np.float64,
                 atol=1e-6, rtol=1e-5, epsilon=None):
        self.name, self.nodes, self.outputs, self.opset = name, nodes, outputs, opset
        self.epsilon = epsilon or EPSILON[dtype]
        self.params = {k: np.asarray(v, dtype=dtype) for k, v in params.items()}
        self.constants = constants or {}
        self.dtype, self.atol, self.rtol = dtype, atol, rtol

    def model(self, params_as_inputs, weight_shapes):
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(self.dtype))
        nodes = list(self.nodes)
        inputs, initializers = [], []
        for name, value in self.params.items():
            if params_as_inputs:
                inputs.append(helper.make_tensor_value_info(name, elem, value.shape))
            else:
                initializers.append(numpy_helper.from_array(value, name))
        for name, value in self.constants.items():
            initializers.append(numpy_helper.from_array(np.asarray(value), name))
        terms = []
        for k, out in enumerate(self.outputs):
            inputs.append(helper.make_tensor_value_info(f"r{k}", elem, weight_shapes[k]))
            nodes.append(helper.make_node("Mul", [out, f"r{k}"], [f"weighted{k}"]))
            nodes.append(helper.make_node("ReduceSum", [f"weighted{k}"], [f"term{k}"],
                                          keepdims=0))
            terms.append(f"term{k}")
        total = terms[0]
        for k, term in enumerate(terms[1:]):
            nodes.append(helper.make_node("Add", [total, term], [f"total{k}"]))
            total = f"total{k}"
        nodes.append(helper.make_node("Identity", [total], ["loss"]))
        graph = helper.make_graph(nodes, self.name, inputs,
                                  [helper.make_tensor_value_info("loss", elem, [])],
                                  initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        return model

    def output_shapes(self):
        """Shapes of the outputs, from the reference evaluator on the case's nodes."""
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(self.dtype))
        graph = helper.make_graph(
            self.nodes, "probe",
            [helper.make_tensor_value_info(k, elem, v.shape) for k, v in self.params.items()],
            [helper.make_empty_tensor_value_info(out) for out in self.outputs],
            [numpy_helper.from_array(np.asarray(v), k) for k, v in self.constants.items()])
        probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        return [r.shape for r in ReferenceEvaluator(probe).run(None, dict(self.params))]

    def run(self, workdir):
        generator = rng(1)
        shapes = self.output_shapes()
        weights = {f"r{k}": generator.standard_normal(shape).astype(self.dtype)
                   for k, shape in enumerate(shapes)}
        path = os.path.join(workdir, f"{self.name}.onnx")
        onnx.save(self.model(params_as_inputs=False, weight_shapes=shapes), path)
        out = os.path.join(workdir, self.name)
        compiled = subprocess.run(["cleave", "compile", path, "-o", out, "--gradients"],
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            return [f"cleave compile failed: {compiled.stderr.strip()}"]
        flags = []
        for name, value in weights.items():
            file = os.path.join(workdir, f"{self.name}.{name}.npy")
            np.save(file, value)
            flags += ["--input", f"{name}={file}"]
        results = os.path.join(workdir, f"{self.name}.results")
        ran = subprocess.run(["cleave", "run", out, *flags, "--output-dir", results],
                             capture_output=True, text=True)
        if ran.returncode != 0:
            return [f"cleave run failed: {ran.stderr.strip()}"]

        evaluator = ReferenceEvaluator(self.model(params_as_inputs=True, weight_shapes=shapes))

        def loss(params):
            return float(evaluator.run(None, {**params, **weights})[0])

        problems = []
        ours_loss = float(np.load(os.path.join(results, "loss.npy")))
        reference_loss = loss(self.params)
        if abs(ours_loss - reference_loss) > self.atol + self.rtol * abs(reference_loss):
            problems.append(f"loss {ours_loss} differs from the reference {reference_loss}")
        for name, value in self.params.items():
            file = os.path.join(results, f"grad_{name}.npy")
            if not os.path.exists(file):
                problems.append(f"no gradient for {name}")
                continue
            ours = np.load(file)
            expected = np.zeros_like(value, dtype=np.float64)
            for index in np.ndindex(value.shape):
                plus = {k: v.copy() for k, v in self.params.items()}
                minus = {k: v.copy() for k, v in self.params.items()}
                plus[name][index] += self.epsilon
                minus[name][index] -= self.epsilon
                expected[index] = (loss(plus) - loss(minus)) / (2 * self.epsilon)
            if ours.shape != value.shape:
                problems.append(f"grad of {name} has shape {ours.shape}, expected {value.shape}")
                continue
            error = np.abs(ours - expected)
            bound = self.atol + self.rtol * np.abs(expected)
            if np.any(error > bound):
                worst = np.unravel_index(np.argmax(error - bound), error.shape)
                problems.append(f"grad of {name}{list(worst)}: cleave {ours[worst]:.9g}, "
                                f"finite differences {expected[worst]:.9g}")
        return problems


class Cases:
    def __init__(self):
        self.cases = []

    def add(self, name, **kwargs):
        self.cases.append(Case(name, **kwargs))

    def main(self):
        workdir = sys.argv[1]
        os.makedirs(workdir, exist_ok=True)
        selected = sys.argv[2:]
        failed = 0
        for case in self.cases:
            if selected and case.name not in selected:
                continue
            problems = case.run(workdir)
            print(("FAIL " if problems else "PASS ") + case.name)
            for p in problems:
                print("    " + p)
            failed += bool(problems)
        total = sum(1 for c in self.cases if not selected or c.name in selected)
        print(f"{total - failed} passed, {failed} failed")
        sys.exit(1 if failed else 0)
