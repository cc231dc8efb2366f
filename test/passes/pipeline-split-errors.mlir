// Every error of cleave-pipeline-split, each at the function or op at
// fault, before anything changes.
// RUN: split-file %s %t
// RUN: cleave-opt %t/chain.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb})' -verify-diagnostics -split-input-file
// RUN: cleave-opt %t/range.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=2})' -verify-diagnostics
// RUN: cleave-opt %t/unmatched.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1,nope.*=1})' -verify-diagnostics
// RUN: cleave-opt %t/missing.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0})' -verify-diagnostics
// RUN: cleave-opt %t/twice.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=emb=0,w1=1,*=1})' -verify-diagnostics
// RUN: cleave-opt %t/order.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{stage-params=w1=0,emb=1})' -verify-diagnostics
// RUN: cleave-opt %t/empty.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=3},cleave-pipeline-split{stage-params=emb=0,w1=2})' -verify-diagnostics
// RUN: cleave-opt %t/few.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=4},cleave-pipeline-split)' -verify-diagnostics
// RUN: cleave-opt %t/virtual.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split{virtual-stages=0})' -verify-diagnostics
// RUN: cleave-opt %t/annotated-order.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split)' -verify-diagnostics
// RUN: cleave-opt %t/annotated-range.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split)' -verify-diagnostics
// RUN: cleave-opt %t/unannotated.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split)' -verify-diagnostics
// RUN: cleave-opt %t/no-forward.mlir --pass-pipeline='builtin.module(cleave-create-mesh{mesh=dp=1,pp=2},cleave-pipeline-split)' -verify-diagnostics

//--- chain.mlir
// expected-error @+1 {{stages entry 'emb' is not GLOB=STAGE}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- range.mlir
// expected-error @+1 {{stages entry 'w1=2' names stage 2, but there are 2 stages (0 to 1)}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- unmatched.mlir
// expected-error @+1 {{stages entry 'nope.*=1' matches no parameter}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- missing.mlir
// expected-error @+1 {{parameter 'w1' is in no stage of the stages file}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- twice.mlir
// expected-error @+1 {{parameter 'emb' is in two stages of the stages file, 0 and 1}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- order.mlir
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{parameter 'w1' is in stage 0 of the stages file, but every op that reads it needs values of a later stage (this one: stage 1): the stages are out of order}}
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- empty.mlir
// expected-error @+1 {{pipeline stage 1 of 3 has no op (no parameter of the stages file is read there)}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- few.mlir
// expected-error @+1 {{has 2 ops that depend on parameters, too few to fill 4 pipeline stages}}
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- virtual.mlir
// expected-error @+1 {{virtual-stages must be 1 or more, not 0}}
module {
  func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}

//--- annotated-order.mlir
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  %h0 = cleave.matmul %x, %emb {cleave.device_config = [{configuration = "c", sharding = [], pipeline_stage = 1 : i64}]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{has pipeline_stage 0 but reads a value of stage 1: the stages are out of order}}
  %h1 = cleave.matmul %h0, %w1 {cleave.device_config = [{configuration = "c", sharding = [], pipeline_stage = 0 : i64}]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- annotated-range.mlir
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"}) -> tensor<4x8xf32> {
  // expected-error @+1 {{has pipeline_stage 7, but there are 2 stages (0 to 1)}}
  %h0 = cleave.matmul %x, %emb {cleave.device_config = [{configuration = "c", sharding = [], pipeline_stage = 7 : i64}]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h0 : tensor<4x8xf32>
}

//--- unannotated.mlir
func.func @forward(%x: tensor<4x8xf32> {cleave.kind = "input", cleave.name = "x"},
                   %emb: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "emb"},
                   %w1: tensor<8x8xf32> {cleave.kind = "param", cleave.name = "w1"}) -> tensor<4x8xf32> {
  // expected-error @+1 {{reads a parameter but has no pipeline_stage, and nothing it reads has one: give its node a pipeline_stage, or use a stages file}}
  %h0 = cleave.matmul %x, %emb : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = cleave.matmul %h0, %w1 {cleave.device_config = [{configuration = "c", sharding = [], pipeline_stage = 1 : i64}]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %h1 : tensor<4x8xf32>
}

//--- no-forward.mlir
// expected-error @+1 {{has no @forward of one block to split into pipeline stages}}
module {
  func.func @stage0(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}
