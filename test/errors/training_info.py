# Refusals of `cleave compile --train` for a model whose training_info defines
# the step (test/lib/training_info_models.py): an update_binding whose key is
# not an initializer, whose value is not an output of the algorithm or the
# graph, a key bound twice or to a value of another type, an initialization
# with bindings, no binding at all, a loss that cannot be found, and the flags
# of cleave's own step builder. Each is one error line naming the model (and
# the flag), at most one note, exit 1 (bad input) or 2 (bad usage), nothing on
# stdout and nothing written. --ignore-training-info needs --train, and with
# it the same model compiles a step of cleave's own optimizers.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s write %t
# RUN: %python %s expect 1 %t/o -- cleave compile %t/key_not_initializer.onnx -o %t/o --train | FileCheck %s --check-prefix=KEY
# KEY: cleave: error: {{.*}}key_not_initializer.onnx: training_info[0].update_binding 'G_W1' <- 'W1_new': 'G_W1' is not an initializer of the graph or of this algorithm
# RUN: %python %s expect 1 %t/o -- cleave compile %t/value_not_output.onnx -o %t/o --train | FileCheck %s --check-prefix=VALUE
# VALUE: cleave: error: {{.*}}value_not_output.onnx: training_info[0].update_binding 'W1' <- 'G_W1': 'G_W1' is not an output of this algorithm or of the graph
# RUN: %python %s expect 1 %t/o -- cleave compile %t/key_twice.onnx -o %t/o --train | FileCheck %s --check-prefix=TWICE
# TWICE: cleave: error: {{.*}}key_twice.onnx: training_info[0].update_binding 'W1' <- 'W1_new': 'W1' is already bound: an initializer is updated at most once a step
# RUN: %python %s expect 1 %t/o -- cleave compile %t/value_type.onnx -o %t/o --train | FileCheck %s --check-prefix=TYPE
# TYPE: cleave: error: {{.*}}value_type.onnx: training_info[0].update_binding 'b1' <- 'W1_new': 'b1' is tensor<5xf32> but 'W1_new' is tensor<3x5xf32>
# RUN: %python %s expect 1 %t/o -- cleave compile %t/initialization.onnx -o %t/o --train | FileCheck %s --check-prefix=INIT
# INIT: cleave: error: {{.*}}initialization.onnx: training_info[0]: an initialization with initialization_binding is not supported: training starts from the initializers' values
# INIT-NEXT: note: run the initialization once and store its outputs as the initializers
# RUN: %python %s expect 1 %t/o -- cleave compile %t/no_binding.onnx -o %t/o --train | FileCheck %s --check-prefix=NOBINDING
# NOBINDING: cleave: error: {{.*}}no_binding.onnx: training_info binds no initializer (its update_binding is empty), so a step would change nothing
# NOBINDING-NEXT: note: pass --ignore-training-info to train with cleave's own optimizers
# RUN: %python %s expect 2 %t/o -- cleave compile %t/two_losses.onnx -o %t/o --train | FileCheck %s --check-prefix=TWOLOSSES
# TWOLOSSES: cleave: error: {{.*}}two_losses.onnx: cannot tell which output is the loss the training step logs: the float scalars are loss, penalty
# TWOLOSSES-NEXT: note: name it with --loss NAME
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --loss nothing | FileCheck %s --check-prefix=NOLOSS
# NOLOSS: cleave: error: {{.*}}adam.onnx: --loss 'nothing': is not an output of the graph or of its training_info algorithms
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --loss logits | FileCheck %s --check-prefix=LOGITS
# LOGITS: cleave: error: {{.*}}adam.onnx: --loss 'logits': is tensor<4x2xf32>, not a float scalar

# The flags of cleave's own step builder.
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --optimizer adam | FileCheck %s --check-prefix=OPTIMIZER
# OPTIMIZER: cleave: error: {{.*}}adam.onnx: --optimizer: the model's training_info defines the step
# OPTIMIZER-NEXT: note: drop the flag, or pass --ignore-training-info to train with cleave's own optimizers
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --lr 0.1 | FileCheck %s --check-prefix=LR
# LR: cleave: error: {{.*}}adam.onnx: --lr: the model's training_info defines the step
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --grad-accum 2 | FileCheck %s --check-prefix=ACCUM
# ACCUM: cleave: error: {{.*}}adam.onnx: --grad-accum: the model's training_info defines the step
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --mesh dp=2 | FileCheck %s --check-prefix=MESH
# MESH: cleave: error: {{.*}}adam.onnx: --mesh: the model's training_info defines the step
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --freeze 'W*' | FileCheck %s --check-prefix=FREEZE
# FREEZE: cleave: error: {{.*}}adam.onnx: --freeze: the model's training_info defines the step
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --clip-grad-norm 1 | FileCheck %s --check-prefix=CLIP
# CLIP: cleave: error: {{.*}}adam.onnx: --clip-grad-norm: the model's training_info defines the step
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --train --loss cross_entropy:logits,labels | FileCheck %s --check-prefix=APPEND
# APPEND: cleave: error: {{.*}}adam.onnx: --loss: the model's training_info defines the step

# --ignore-training-info only chooses how a training step is built.
# RUN: %python %s expect 2 %t/o -- cleave compile %t/adam.onnx -o %t/o --ignore-training-info | FileCheck %s --check-prefix=IGNORE
# IGNORE: cleave: error: --ignore-training-info: chooses how a training step is built
# IGNORE-NEXT: note: add --train

# Flags that fit a step the model defines, and --ignore-training-info.
# RUN: cleave compile %t/adam.onnx -o %t/fits --train --grad-accum 1 --loss loss --emit mlir
# RUN: %python %s algorithm %t/fits/plan.json | FileCheck %s --check-prefix=FITS
# FITS: training_info
# RUN: cleave compile %t/adam.onnx -o %t/own --train --ignore-training-info --optimizer adam --emit mlir
# RUN: %python %s algorithm %t/own/plan.json | FileCheck %s --check-prefix=OWN
# OWN: cleave adam

import json
import os
import subprocess
import sys

import onnx
from onnx import helper

import training_info_models as tim

BINDINGS = [(n, n + "_new") for n in tim.WEIGHTS] + [(f"{s}_{n}", f"{s}_{n}_new")
                                                      for s in ("V", "H") for n in tim.WEIGHTS]


def models():
    yield "adam", tim.mlp("adam")[0]
    yield "key_not_initializer", tim.mlp("adam", bindings=[("G_W1", "W1_new")])[0]
    yield "value_not_output", tim.mlp("adam", bindings=[("W1", "G_W1")])[0]
    yield "key_twice", tim.mlp("adam", bindings=BINDINGS + [("W1", "W1_new")], check=False)[0]
    yield "value_type", tim.mlp("adam", bindings=[("b1", "W1_new")])[0]
    yield "no_binding", tim.mlp("adam", bindings=[])[0]
    # A second float scalar among the graph's outputs, and no --loss to choose.
    model = tim.mlp("adam")[0]
    model.graph.node.append(helper.make_node("ReduceSum", ["W2"], ["penalty"], keepdims=0))
    model.graph.output.append(helper.make_tensor_value_info("penalty", tim.F32, []))
    yield "two_losses", model
    # An initialization graph whose output is bound.
    model = tim.mlp("adam")[0]
    info = model.training_info[0]
    info.initialization.CopyFrom(helper.make_graph(
        [helper.make_node("Constant", [], ["T0"],
                          value=helper.make_tensor("v", tim.I64, [], [0]))],
        "init", [], [helper.make_tensor_value_info("T0", tim.I64, [])]))
    entry = info.initialization_binding.add()
    entry.key, entry.value = "T", "T0"
    yield "initialization", model


def expect(code, out, command):
    """Runs `command`: exit `code`, nothing on stdout, one error line and at
    most one note on stderr (echoed for FileCheck), nothing at `out`."""
    result = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(result.stderr)
    lines = result.stderr.splitlines()
    if result.returncode != code:
        sys.exit(f"exit code {result.returncode}, expected {code}")
    if result.stdout:
        sys.exit("expected nothing on stdout")
    if not (1 <= len(lines) <= 2 and lines[0].startswith("cleave: error: ")
            and all(line.startswith("note: ") for line in lines[1:])):
        sys.exit("expected one error line and at most one note")
    for path in (out, out + ".partial"):
        if os.path.exists(path):
            sys.exit(f"{path} was written")


def main():
    if sys.argv[1] == "write":
        for name, model in models():
            onnx.save(model, os.path.join(sys.argv[2], name + ".onnx"))
    elif sys.argv[1] == "expect" and sys.argv[4] == "--":
        expect(int(sys.argv[2]), sys.argv[3], sys.argv[5:])
    elif sys.argv[1] == "algorithm":
        training = json.load(open(sys.argv[2]))["training"]
        print(training["algorithm"], training.get("optimizer", ""))


if __name__ == "__main__":
    main()
