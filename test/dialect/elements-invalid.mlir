// RUN: cleave-opt %s --split-input-file -verify-diagnostics | FileCheck %s

// A view of consecutive elements, and an assignment to one: valid.
// CHECK-LABEL: func.func @chunk
// CHECK: %[[V:.*]] = cleave.elements %arg0[16] : tensor<4x8xf32> -> tensor<16xf32>
// CHECK-NEXT: cleave.assign %arg1 to %[[V]] : tensor<16xf32>
func.func @chunk(%p: tensor<4x8xf32> {cleave.kind = "param", cleave.name = "p"},
                 %x: tensor<16xf32>) {
  %v = cleave.elements %p[16] : tensor<4x8xf32> -> tensor<16xf32>
  cleave.assign %x to %v : tensor<16xf32>
  return
}

// -----

func.func @past_the_end(%p: tensor<4x8xf32>) -> tensor<16xf32> {
  // expected-error@+1 {{elements 24 to 40 are not in the input's 32}}
  %v = cleave.elements %p[24] : tensor<4x8xf32> -> tensor<16xf32>
  return %v : tensor<16xf32>
}

// -----

func.func @negative(%p: tensor<4x8xf32>) -> tensor<16xf32> {
  // expected-error@+1 {{elements -1 to 15 are not in the input's 32}}
  %v = cleave.elements %p[-1] : tensor<4x8xf32> -> tensor<16xf32>
  return %v : tensor<16xf32>
}

// -----

func.func @not_1d(%p: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error@+1 {{result must be 1-D of the input's element type, not 'tensor<2x8xf32>'}}
  %v = cleave.elements %p[0] : tensor<4x8xf32> -> tensor<2x8xf32>
  return %v : tensor<2x8xf32>
}

// -----

func.func @other_type(%p: tensor<4x8xf32>) -> tensor<16xbf16> {
  // expected-error@+1 {{result must be 1-D of the input's element type, not 'tensor<16xbf16>'}}
  %v = cleave.elements %p[0] : tensor<4x8xf32> -> tensor<16xbf16>
  return %v : tensor<16xbf16>
}

// -----

// An assignment's target, through its views, is a parameter or state.
func.func @view_of_a_value(%x: tensor<32xf32>, %y: tensor<16xf32>) {
  %e = cleave.exp %x : (tensor<32xf32>) -> tensor<32xf32>
  %v = cleave.elements %e[0] : tensor<32xf32> -> tensor<16xf32>
  // expected-error@+1 {{target must be a function argument of kind param or state, or a cleave.elements view of one}}
  cleave.assign %y to %v : tensor<16xf32>
  return
}
