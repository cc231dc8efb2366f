// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-order-updates)' | FileCheck %s

// @forward finishes grad:b before grad:a (a backward finishes the last
// layer first); @apply updates a, then b. Each sum is read by one update
// that reads no other sum: the updates move after the last of them, b's
// first. Everything else stays where it is.

// CHECK-LABEL: func.func @apply
// CHECK: %[[SUM_A:.*]] = shard.all_reduce %arg1
// CHECK-NEXT: %[[SUM_B:.*]] = shard.all_reduce %arg2
// CHECK-NEXT: cleave.constant
// CHECK-NEXT: %[[NEW_B:.*]] = cleave.sub %arg4, %[[SUM_B]]
// CHECK-NEXT: %[[NEW_A:.*]] = cleave.sub %arg3, %[[SUM_A]]
// CHECK-NEXT: cleave.assign %[[NEW_A]] to %arg3
// CHECK-NEXT: cleave.assign %[[NEW_B]] to %arg4

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %ga: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:a", cleave.accumulator},
                   %gb: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:b", cleave.accumulator}) {
  cleave.assign %x to %gb : tensor<16xf32>
  cleave.assign %x to %ga : tensor<16xf32>
  return
}

func.func @apply(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                 %ga: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:a", cleave.accumulator},
                 %gb: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:b", cleave.accumulator},
                 %a: tensor<16xf32> {cleave.kind = "param", cleave.name = "a"},
                 %b: tensor<16xf32> {cleave.kind = "param", cleave.name = "b"}) {
  %sa = shard.all_reduce %ga on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %sb = shard.all_reduce %gb on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %na = cleave.sub %a, %sa : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %zero = cleave.constant {value = dense<0.0> : tensor<16xf32>} : tensor<16xf32>
  %nb = cleave.sub %b, %sb : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %na to %a : tensor<16xf32>
  cleave.assign %nb to %b : tensor<16xf32>
  return
}

// -----

// An op that reads both sums (the clip's norm): nothing moves.

// CHECK-LABEL: func.func @apply
// CHECK: cleave.add
// CHECK-NEXT: cleave.sub %arg3
// CHECK-NEXT: cleave.sub %arg4

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @forward(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"},
                   %ga: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:a", cleave.accumulator},
                   %gb: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:b", cleave.accumulator}) {
  cleave.assign %x to %gb : tensor<16xf32>
  cleave.assign %x to %ga : tensor<16xf32>
  return
}

func.func @apply(%count: tensor<f32> {cleave.kind = "state", cleave.name = "cleave.loss_count", cleave.accumulator},
                 %ga: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:a", cleave.accumulator},
                 %gb: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:b", cleave.accumulator},
                 %a: tensor<16xf32> {cleave.kind = "param", cleave.name = "a"},
                 %b: tensor<16xf32> {cleave.kind = "param", cleave.name = "b"}) -> tensor<16xf32> {
  %sa = shard.all_reduce %ga on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %sb = shard.all_reduce %gb on @mesh grid_axes = [0] : tensor<16xf32> -> tensor<16xf32>
  %both = cleave.add %sa, %sb : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %na = cleave.sub %a, %both : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %nb = cleave.sub %b, %both : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %na to %a : tensor<16xf32>
  cleave.assign %nb to %b : tensor<16xf32>
  return %both : tensor<16xf32>
}
