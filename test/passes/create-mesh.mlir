// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2,tp=4})' | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2,tp=4},cleave-create-mesh{mesh=dp=2,tp=4})' | FileCheck %s
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=x})' 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2,dp=2})' 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=tp=2})' 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=2},cleave-create-mesh{mesh=dp=4})' 2>&1 | FileCheck %s --check-prefix=OTHER

// The axes in order, ranks row-major over them; a second run with the same
// mesh keeps the one there.
// CHECK: shard.grid @mesh(shape = 2x4) {cleave.axes = ["dp", "tp"]}
// CHECK-NOT: shard.grid
// CHECK-LABEL: func.func @forward

// SIZE: error: mesh: axis 'dp' has size 'x': expected a whole number >= 1
// TWICE: error: mesh: axis 'dp' is named twice
// NODP: error: the mesh has no 'dp' axis
// OTHER: error: the module's mesh differs from the one asked for

func.func @forward(%x: tensor<f32> {cleave.kind = "input", cleave.name = "x"}) -> (tensor<f32> {cleave.name = "loss"}) {
  return %x : tensor<f32>
}
