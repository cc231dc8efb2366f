// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-create-mesh{mesh=dp=2,tp=2},cleave-build-train-step{clip-grad-norm=1.0})' | FileCheck %s --check-prefix=PLAIN
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-create-mesh{mesh=dp=2,tp=2},cleave-build-train-step{clip-grad-norm=1.0 zero=2})' | FileCheck %s --check-prefix=FLAT
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-loss,cleave-autodiff{loss=loss.sum}),cleave-create-mesh{mesh=dp=2,tp=2},cleave-build-train-step{clip-grad-norm=1.0 zero=3})' | FileCheck %s --check-prefix=STAGE3

// Global-norm clipping on dp x tp = 2 x 2 counts every element once: `w` is
// split over tp (its 4 local elements differ between the tp ranks), `v` is
// replicated. The sum of squares of what is split is all-reduced over tp
// (grid axis 1); with ZeRO, whose ranks hold disjoint dp slices, the total
// is then all-reduced over dp (grid axis 0).

// Without ZeRO, the gradients are whole over dp (cleave-data-parallel sums
// them later): only w's squares cross tp.
// PLAIN-LABEL: func.func @apply
// PLAIN: %[[V:.*]] = cleave.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
// PLAIN: %[[W:.*]] = cleave.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
// PLAIN: %[[WALL:.*]] = shard.all_reduce %[[W]] on @mesh grid_axes = [1] : tensor<f32> -> tensor<f32>
// PLAIN: %[[ALL:.*]] = cleave.add %[[V]], %[[WALL]]
// PLAIN-NOT: shard.all_reduce
// PLAIN: cleave.sqrt %[[ALL]]

// ZeRO 2: w comes first in the flat buffer though declared last, so the
// split elements are the flat indices below 16; this rank's 16 (of 32) are
// its dp coordinate times 16 onward.
// FLAT-LABEL: func.func @forward
// FLAT-SAME: tensor<3xf32> {cleave.flat_member = "flat:params", cleave.flat_offset = 16 : i64, cleave.kind = "param", cleave.name = "v"}
// FLAT-SAME: tensor<4xf32> {cleave.flat_member = "flat:params", cleave.flat_offset = 0 : i64, cleave.kind = "param", cleave.name = "w"
// FLAT-LABEL: func.func @apply
// FLAT: %[[RANKS:.*]] = cleave.range {delta = 1 : i64, limit = 2 : i64, start = 0 : i64} : tensor<2xi64>
// FLAT: %[[RANK:.*]] = shard.all_slice %[[RANKS]] on @mesh grid_axes = [0] slice_axis = 0 : tensor<2xi64> -> tensor<1xi64>
// FLAT: %[[FIRST:.*]] = cleave.mul %[[RANK]], %{{.*}} : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
// FLAT: %[[INDEX:.*]] = cleave.add %{{.*}}, %[[FIRST]] : (tensor<16xi64>, tensor<1xi64>) -> tensor<16xi64>
// FLAT: %[[SPLIT:.*]] = cleave.less %[[INDEX]], %{{.*}} : (tensor<16xi64>, tensor<i64>) -> tensor<16xi1>
// FLAT: cleave.where %[[SPLIT]]
// FLAT: %[[S:.*]] = cleave.reduce_sum
// FLAT: %[[WHOLE:.*]] = cleave.not %[[SPLIT]]
// FLAT: cleave.where %[[WHOLE]]
// FLAT: %[[R:.*]] = cleave.reduce_sum
// FLAT: %[[SALL:.*]] = shard.all_reduce %[[S]] on @mesh grid_axes = [1]
// FLAT: %[[SUM:.*]] = cleave.add %[[R]], %[[SALL]]
// FLAT: %[[ALL:.*]] = shard.all_reduce %[[SUM]] on @mesh grid_axes = [0]
// FLAT: cleave.sqrt %[[ALL]]

// ZeRO 3: each parameter's slice (16 of 32 padded elements) is summed on its
// own.
// STAGE3-LABEL: func.func @apply
// STAGE3: %[[V:.*]] = cleave.reduce_sum %{{.*}} : (tensor<16xf32>) -> tensor<f32>
// STAGE3: %[[W:.*]] = cleave.reduce_sum %{{.*}} : (tensor<16xf32>) -> tensor<f32>
// STAGE3: %[[WALL:.*]] = shard.all_reduce %[[W]] on @mesh grid_axes = [1]
// STAGE3: %[[SUM:.*]] = cleave.add %[[V]], %[[WALL]]
// STAGE3: %[[ALL:.*]] = shard.all_reduce %[[SUM]] on @mesh grid_axes = [0]
// STAGE3: cleave.sqrt %[[ALL]]

func.func @forward(%x: tensor<4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %v: tensor<3xf32> {cleave.kind = "param", cleave.name = "v"},
                   %w: tensor<4xf32> {cleave.kind = "param", cleave.name = "w",
                                      cleave.split_axis = "tp", cleave.split_blocks = 1 : i64,
                                      cleave.split_dim = 0 : i64})
    -> (tensor<f32> {cleave.name = "objective"}) {
  %h = cleave.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a = cleave.reduce_sum %h {axes = array<i64: 0>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
  %g = cleave.mul %v, %v : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b = cleave.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : (tensor<3xf32>) -> tensor<f32>
  %l = cleave.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
