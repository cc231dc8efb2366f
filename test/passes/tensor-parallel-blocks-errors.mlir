// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding{plan=qkv.weight=tp:3/-,qkv.bias=tp})'

// A value split over tp in blocks reaches an op that does not treat the
// blocks alike: upstream would take it for a plain split.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %qkv: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight"},
                   %bias: tensor<24xf32> {cleave.kind = "param", cleave.name = "qkv.bias"})
    -> tensor<f32> {
  %t = cleave.transpose %qkv {perm = array<i64: 1, 0>} : (tensor<24x8xf32>) -> tensor<8x24xf32>
  %p = cleave.matmul %x, %t : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
  // expected-error @below {{reads a value split over tp in 3 blocks; only transposes, reshapes that keep the split dim, matrix products (as the right operand, split along N), elementwise ops with every split operand split alike, and a split into its blocks may read it}}
  %s = cleave.softmax %p {axis = 0 : i64} : (tensor<4x24xf32>) -> tensor<4x24xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x24xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A bias split plainly added to a product split in 3 blocks: each rank
// would add the wrong part of the bias.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %qkv: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight"},
                   %bias: tensor<24xf32> {cleave.kind = "param", cleave.name = "qkv.bias"})
    -> tensor<f32> {
  // expected-error @below {{reads a value split over tp in 3 blocks}}
  %p = cleave.gemm %x, %qkv, %bias {trans_b = true} : (tensor<4x8xf32>, tensor<24x8xf32>, tensor<24xf32>) -> tensor<4x24xf32>
  %l = cleave.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x24xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A reshape that merges the split dim with another mixes the blocks.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %qkv: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight"},
                   %bias: tensor<24xf32> {cleave.kind = "param", cleave.name = "qkv.bias"})
    -> tensor<f32> {
  %t = cleave.transpose %qkv {perm = array<i64: 1, 0>} : (tensor<24x8xf32>) -> tensor<8x24xf32>
  %p = cleave.matmul %x, %t : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
  // expected-error @below {{reads a value split over tp in 3 blocks}}
  %f = cleave.reshape %p {shape = array<i64: 96>} : (tensor<4x24xf32>) -> tensor<96xf32>
  %l = cleave.reduce_sum %f {axes = array<i64: 0>, keepdims = false} : (tensor<96xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A whole input added to a product split in 3 blocks: each rank would
// slice it as one block.
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %y: tensor<4x24xf32> {cleave.kind = "input", cleave.name = "y"},
                   %qkv: tensor<24x8xf32> {cleave.kind = "param", cleave.name = "qkv.weight"},
                   %bias: tensor<24xf32> {cleave.kind = "param", cleave.name = "qkv.bias"})
    -> tensor<f32> {
  %t = cleave.transpose %qkv {perm = array<i64: 1, 0>} : (tensor<24x8xf32>) -> tensor<8x24xf32>
  %p = cleave.matmul %x, %t : (tensor<4x8xf32>, tensor<8x24xf32>) -> tensor<4x24xf32>
  // expected-error @below {{reads a value split over tp in 3 blocks with operand #1 whole along its split dim; split that operand in the same blocks too}}
  %s = cleave.add %p, %y : (tensor<4x24xf32>, tensor<4x24xf32>) -> tensor<4x24xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x24xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
