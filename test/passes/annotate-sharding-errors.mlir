// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding)'

// Without a plan the model's ONNX sharding specs (cleave.device_config, as
// the importer keeps them) are the plan; specs cleave cannot follow are
// errors at the node that carries them.

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  // expected-error @below {{the sharding spec of 'w' splits axis 2 of a rank-2 tensor}}
  %h = cleave.gemm %x, %w {trans_b = true, cleave.device_config = [{configuration = "c", sharding = [{tensor = "w", sharded_dims = [{axis = 2 : i64, num_shards = [2]}]}]}]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  // expected-error @below {{the sharding spec of 'w' does not split it into the mesh's 2 tp ranks}}
  %h = cleave.gemm %x, %w {trans_b = true, cleave.device_config = [{configuration = "c", sharding = [{tensor = "w", sharded_dims = [{axis = 0 : i64, num_shards = [4]}]}]}]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  // expected-error @below {{the sharding spec of 'w' splits more than one dim; cleave splits one, over tp}}
  %h = cleave.gemm %x, %w {trans_b = true, cleave.device_config = [{configuration = "c", sharding = [{tensor = "w", sharded_dims = [{axis = 0 : i64, num_shards = [2]}, {axis = 1 : i64, num_shards = [2]}]}]}]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "w"})
    -> tensor<f32> {
  // expected-error @below {{a sharding spec without 'tensor' or 'sharded_dims'}}
  %h = cleave.gemm %x, %w {trans_b = true, cleave.device_config = [{configuration = "c", sharding = [{sharded_dims = []}]}]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %h {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
