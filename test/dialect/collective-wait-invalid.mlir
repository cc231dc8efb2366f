// RUN: cleave-opt %s --split-input-file -verify-diagnostics

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @not_started(%w: tensor<8xf32>) -> tensor<16xf32> {
  %g = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xf32> -> tensor<16xf32>
  // expected-error@+1 {{waits for a value that no started shard.all_gather, shard.reduce_scatter or shard.all_reduce (cleave.started) makes}}
  %r = cleave.collective_wait %g from %w : tensor<8xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

func.func @not_a_gather(%w: tensor<8xf32>, %x: tensor<16xf32>) -> tensor<16xf32> {
  %y = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error@+1 {{waits for a value that no started shard.all_gather}}
  %r = cleave.collective_wait %y from %w : tensor<8xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}
func.func @other_source(%w: tensor<8xf32>, %v: tensor<8xf32>) -> tensor<16xf32> {
  %g = shard.all_gather %w on @mesh grid_axes = [0] gather_axis = 0 {cleave.started} : tensor<8xf32> -> tensor<16xf32>
  // expected-error@+1 {{source is not the collective's operand}}
  %r = cleave.collective_wait %g from %v : tensor<8xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
}
