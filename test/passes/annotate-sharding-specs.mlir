// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,tp=2},cleave-annotate-sharding)' | FileCheck %s

// Without a plan, the ONNX sharding specs the importer keeps
// (cleave.device_config) split the parameters they name, exactly by name:
// a name with glob characters in it ("blocks[0].w") matches itself only,
// not "blocks0.w".
// CHECK-LABEL: func.func @forward
// CHECK-SAME: cleave.name = "blocks[0].w", cleave.split_axis = "tp", cleave.split_blocks = 1 : i64, cleave.split_dim = 0 : i64}
// CHECK-SAME: cleave.name = "blocks0.w"}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "blocks[0].w"},
                   %v: tensor<16x8xf32> {cleave.kind = "param", cleave.name = "blocks0.w"})
    -> tensor<f32> {
  %h = cleave.gemm %x, %w {trans_b = true, cleave.device_config = [{configuration = "c", sharding = [{tensor = "blocks[0].w", sharded_dims = [{axis = 0 : i64, num_shards = [2]}]}]}]} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %g = cleave.gemm %x, %v {trans_b = true} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s = cleave.add %h, %g : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %l = cleave.reduce_sum %s {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
