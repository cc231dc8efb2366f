// RUN: cleave-opt %s -split-input-file -verify-diagnostics

func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{program has an unknown op 'log' in instruction 0}}
  %r = cleave.fused_elementwise %a {program = "log 0>1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @later_register(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{program has a bad operand 1 in instruction 0}}
  %r = cleave.fused_elementwise %a {program = "add 0 1>1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @outputs(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{program has 2 outputs, the op 1 results}}
  %r = cleave.fused_elementwise %a {program = "neg 0>0,1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @broadcast(%a: tensor<4xf32>, %b: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @below {{input 'tensor<2xf32>' is neither the results' shape nor one element}}
  %r = cleave.fused_elementwise %a, %b {program = "add 0 1>2"} : (tensor<4xf32>, tensor<2xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @no_end(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{program has no ';' or '>' after instruction 0}}
  %r = cleave.fused_elementwise %a {program = "neg 0"} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @select_third(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{program has a bad operand 2 in instruction 0}}
  %r = cleave.fused_elementwise %c, %a {program = "select 0 1>2"} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @condition_as_number(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{i1 input 0 is read by instruction 0 other than as a select's condition}}
  %r = cleave.fused_elementwise %c, %a {program = "add 0 1>2"} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @condition_chosen(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{i1 input 0 is read by instruction 0 other than as a select's condition}}
  %r = cleave.fused_elementwise %c, %a {program = "select 0 0 1>2"} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @condition_output(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{output 0 is the i1 input 0}}
  %r = cleave.fused_elementwise %c, %a {program = "neg 1>0"} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
