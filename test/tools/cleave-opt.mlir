// RUN: cleave-opt --help | FileCheck %s --check-prefix=HELP
// RUN: cleave-opt %s --pass-pipeline="builtin.module(func.func(canonicalize,cse))" | FileCheck %s

// cleave-opt knows the cleave dialect next to the upstream ones Cleave builds
// on, and the upstream shard passes.
// HELP-DAG: --sharding-propagation
// HELP-DAG: --shard-partition
// HELP-DAG: --canonicalize

// CSE merges the two matmuls: cleave ops are pure.
// CHECK: shard.grid @mesh(shape = 2x2)
// CHECK-LABEL: func.func @mixed
// CHECK: %[[M:.*]] = cleave.matmul
// CHECK-NOT: cleave.matmul
// CHECK: arith.addf %[[M]], %[[M]]
shard.grid @mesh(shape = 2x2)
func.func @mixed(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = cleave.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = cleave.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %2 = arith.addf %0, %1 : tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}
