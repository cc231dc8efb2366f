// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// Every cleave.* attribute is declared (dialects/Cleave/CleaveAttributes.def)
// with the kind of value it holds; the verifiers refuse the rest, wherever
// they sit: function arguments and results, ops, the module.

// expected-error@+1 {{'func.func' op argument 0: 'cleave.nmae' is not an attribute of the cleave dialect}}
func.func @misspelt(%x: tensor<f32> {cleave.nmae = "x"}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// expected-error@+1 {{'func.func' op argument 0: 'cleave.name' must be StringAttr, not 3 : i64}}
func.func @name_not_a_string(%x: tensor<f32> {cleave.name = 3 : i64}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// expected-error@+1 {{'func.func' op argument 0: 'cleave.kind' is "weight", not "input", "param", "state" or "stash"}}
func.func @unknown_kind(%x: tensor<f32> {cleave.kind = "weight"}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// expected-error@+1 {{'func.func' op argument 0: 'cleave.weights_offset' is -64, not >= 0}}
func.func @negative_offset(%x: tensor<f32> {cleave.weights_offset = -64 : i64}) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// expected-error@+1 {{'func.func' op result 0: 'cleave.grad_of' must be StringAttr, not unit}}
func.func @result(%x: tensor<f32>) -> (tensor<f32> {cleave.grad_of}) {
  return %x : tensor<f32>
}

// -----

func.func @op(%x: tensor<f32>) -> tensor<f32> {
  // expected-error@+1 {{'cleave.neg' op 'cleave.arena_offsets' must be DenseI64ArrayAttr, not 0 : i64}}
  %y = cleave.neg %x {cleave.arena_offsets = 0 : i64} : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// expected-error@+1 {{'builtin.module' op 'cleave.opset' must be IntegerAttr, not "17"}}
module attributes {cleave.opset = "17"} {
}
