// RUN: cleave-opt %s -canonicalize -split-input-file | FileCheck %s

// Shape arithmetic as exporters emit it folds to constants. Expected values
// follow the ONNX operator definitions, worked out by hand.

// CHECK-LABEL: func.func @shape_gather_concat
// CHECK-NEXT: %[[C:.*]] = cleave.constant {value = dense<[6, -1]> : tensor<2xi64>} : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_gather_concat(%x: tensor<2x3x4xf32>) -> tensor<2xi64> {
  %s = cleave.shape %x {start = 0 : i64, end = 3 : i64} : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %i0 = cleave.constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %i1 = cleave.constant {value = dense<1> : tensor<i64>} : tensor<i64>
  %d0 = cleave.gather %s, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = cleave.gather %s, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %m = cleave.mul %d0, %d1 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %u = cleave.unsqueeze %m {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %neg = cleave.constant {value = dense<-1> : tensor<1xi64>} : tensor<1xi64>
  %c = cleave.concat %u, %neg {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  return %c : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @scale_from_head_dim
// 1 / sqrt(16) = 0.25
// CHECK: cleave.constant {value = dense<2.500000e-01> : tensor<f32>}
func.func @scale_from_head_dim(%q: tensor<2x4x16xf32>) -> tensor<f32> {
  %s = cleave.shape %q {start = 2 : i64, end = 3 : i64} : (tensor<2x4x16xf32>) -> tensor<1xi64>
  %sq = cleave.squeeze %s {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %f = cleave.cast %sq {to = f32} : (tensor<i64>) -> tensor<f32>
  %r = cleave.sqrt %f : (tensor<f32>) -> tensor<f32>
  %inv = cleave.reciprocal %r : (tensor<f32>) -> tensor<f32>
  return %inv : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @generators
// CHECK-DAG: cleave.constant {value = dense<[1, 3, 5, 7]> : tensor<4xi64>}
// CHECK-DAG: cleave.constant {value = dense<1.000000e+00> : tensor<2x3xf32>}
func.func @generators() -> (tensor<4xi64>, tensor<2x3xf32>) {
  %r = cleave.range {start = 1 : i64, limit = 9 : i64, delta = 2 : i64} : tensor<4xi64>
  %c = cleave.constant_of_shape {shape = array<i64: 2, 3>, value = 1.0 : f32} : tensor<2x3xf32>
  return %r, %c : tensor<4xi64>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @where_equal_slice
// Equal([2, 3, 4], [2, -1, 4]) = [T, F, T]; Where picks [5, 3, 5];
// Slice [::-2] of that is [5, 5].
// CHECK: cleave.constant {value = dense<5> : tensor<2xi64>}
func.func @where_equal_slice() -> tensor<2xi64> {
  %a = cleave.constant {value = dense<[2, 3, 4]> : tensor<3xi64>} : tensor<3xi64>
  %b = cleave.constant {value = dense<[2, -1, 4]> : tensor<3xi64>} : tensor<3xi64>
  %five = cleave.constant {value = dense<5> : tensor<i64>} : tensor<i64>
  %e = cleave.equal %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %w = cleave.where %e, %five, %a : (tensor<3xi1>, tensor<i64>, tensor<3xi64>) -> tensor<3xi64>
  %s = cleave.slice %w {starts = array<i64: 2>, ends = array<i64: -1>, steps = array<i64: -2>} : (tensor<3xi64>) -> tensor<2xi64>
  return %s : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @integer_division_truncates
// ONNX integer Div truncates toward zero: -7 / 2 = -3.
// CHECK: cleave.constant {value = dense<-3> : tensor<i64>}
func.func @integer_division_truncates() -> tensor<i64> {
  %a = cleave.constant {value = dense<-7> : tensor<i64>} : tensor<i64>
  %b = cleave.constant {value = dense<2> : tensor<i64>} : tensor<i64>
  %d = cleave.div %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// Division by zero is left for run time rather than folded to garbage.
// CHECK-LABEL: func.func @division_by_zero_stays
// CHECK: cleave.div
func.func @division_by_zero_stays() -> tensor<i64> {
  %a = cleave.constant {value = dense<7> : tensor<i64>} : tensor<i64>
  %b = cleave.constant {value = dense<0> : tensor<i64>} : tensor<i64>
  %d = cleave.div %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// Non-constant operands do not fold; identity forwards its operand.
// CHECK-LABEL: func.func @no_fold
// CHECK-NEXT: %[[A:.*]] = cleave.add %arg0, %arg0
// CHECK-NEXT: return %[[A]]
func.func @no_fold(%x: tensor<3xf32>) -> tensor<3xf32> {
  %i = cleave.identity %x : (tensor<3xf32>) -> tensor<3xf32>
  %a = cleave.add %i, %i : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %a : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @split
// Split [[1, 2, 3], [4, 5, 6]] along axis 1 into 1 and 2 columns: [[1], [4]]
// and [[2, 3], [5, 6]] (GPT-J's rotary positions cut the shape of an expand
// this way, which must be a constant).
// CHECK-DAG: cleave.constant {value = dense<{{\[}}[1], [4]]> : tensor<2x1xi64>}
// CHECK-DAG: cleave.constant {value = dense<{{\[}}[2, 3], [5, 6]]> : tensor<2x2xi64>}
// CHECK-NOT: cleave.split
func.func @split() -> (tensor<2x1xi64>, tensor<2x2xi64>) {
  %a = cleave.constant {value = dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>} : tensor<2x3xi64>
  %l, %r = cleave.split %a {axis = 1 : i64, split = array<i64: 1, 2>} : (tensor<2x3xi64>) -> (tensor<2x1xi64>, tensor<2x2xi64>)
  return %l, %r : tensor<2x1xi64>, tensor<2x2xi64>
}

// -----

// CHECK-LABEL: func.func @transpose
// [[1, 2, 3], [4, 5, 6]] transposed: [[1, 4], [2, 5], [3, 6]] (torch's
// F.pad exports its pads reversed through a transpose of a constant).
// CHECK: cleave.constant {value = dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>}
// CHECK-NOT: cleave.transpose
func.func @transpose() -> tensor<3x2xi64> {
  %a = cleave.constant {value = dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>} : tensor<2x3xi64>
  %t = cleave.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  return %t : tensor<3x2xi64>
}

// -----

// CHECK-LABEL: func.func @cumsum_of_constant
// CumSum of the int64 ones [[1, 1, 1], [1, 1, 1]] along its rows, as the
// importer poses it (a product with the upper triangle of ones): [[1, 2, 3],
// [1, 2, 3]] (OPT counts its positions so). A float product stays for the
// kernel.
// CHECK: cleave.constant {value = dense<{{\[}}[1, 2, 3], [1, 2, 3]]> : tensor<2x3xi64>}
// CHECK: cleave.matmul {{.*}} -> tensor<2x3xf32>
// CHECK-NOT: cleave.matmul
func.func @cumsum_of_constant() -> (tensor<2x3xi64>, tensor<2x3xf32>) {
  %ones = cleave.constant {value = dense<1> : tensor<2x3xi64>} : tensor<2x3xi64>
  %triangle = cleave.constant {value = dense<[[1, 1, 1], [0, 1, 1], [0, 0, 1]]> : tensor<3x3xi64>} : tensor<3x3xi64>
  %sums = cleave.matmul %ones, %triangle : (tensor<2x3xi64>, tensor<3x3xi64>) -> tensor<2x3xi64>
  %f = cleave.constant {value = dense<1.0> : tensor<2x3xf32>} : tensor<2x3xf32>
  %g = cleave.constant {value = dense<[[1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]> : tensor<3x3xf32>} : tensor<3x3xf32>
  %fs = cleave.matmul %f, %g : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  return %sums, %fs : tensor<2x3xi64>, tensor<2x3xf32>
}
