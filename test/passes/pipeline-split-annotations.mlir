// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split)' | FileCheck %s

// The ONNX pipeline_stage of each node (kept by the importer as
// cleave.device_config): an annotated op goes to its stage, one without an
// annotation to the latest stage of what it reads. The relu after the first
// product is unannotated and goes with it.

// CHECK-LABEL: func.func @stage0
// CHECK: %[[H0:.*]] = cleave.matmul %arg0, %arg1
// CHECK: %[[R:.*]] = cleave.relu %[[H0]]
// CHECK: cleave.pipeline_send %[[R]] to stage 1 tag 0
// CHECK-LABEL: func.func @stage1
// CHECK: %[[IN:.*]] = cleave.pipeline_recv from stage 0 tag 0
// CHECK: cleave.matmul %[[IN]], %arg0
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w0: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w0"},
                   %w1: tensor<8x512xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x512xf32> {
  %h0 = cleave.matmul %x, %w0 {cleave.device_config = [{configuration = "c", sharding = [], pipeline_stage = 0 : i64}]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = cleave.relu %h0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %r, %w1 {cleave.device_config = [{configuration = "c", sharding = [], pipeline_stage = 1 : i64}]} : (tensor<4x8xf32>, tensor<8x512xf32>) -> tensor<4x512xf32>
  return %h1 : tensor<4x512xf32>
}
