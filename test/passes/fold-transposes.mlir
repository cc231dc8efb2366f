// RUN: cleave-opt %s --split-input-file --cleave-fold-transposes | FileCheck %s

// A Linear layer as torch exports it for a batch of sequences: the weight
// transposed, then a matmul of the 3-D activation by it. It becomes one gemm
// over the rows (the batch folded in by reshapes) reading the weight with
// trans_b; the transpose goes.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>)
// CHECK-NEXT: %[[ROWS:.*]] = cleave.reshape %[[X]] {shape = array<i64: 6, 4>}
// CHECK-NEXT: %[[G:.*]] = cleave.gemm %[[ROWS]], %[[W]] {trans_b = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: %[[Y:.*]] = cleave.reshape %[[G]] {shape = array<i64: 2, 3, 5>}
// CHECK-NEXT: return %[[Y]]
func.func @linear(%x: tensor<2x3x4xf32>, %w: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %wt = cleave.transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %y = cleave.matmul %x, %wt : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Its backward: the input's gradient reads the transposed weight (its flag
// flips back), and the weight's gradient, a gemm transposed back to the
// weight's layout, is the gemm of its factors swapped with both flags
// flipped; c, alpha and beta stay with the gemm whose factor folds.
// CHECK-LABEL: func.func @backward
// CHECK-SAME: (%[[A:.*]]: tensor<6x4xf32>, %[[G:.*]]: tensor<6x5xf32>, %[[W:.*]]: tensor<5x4xf32>, %[[C:.*]]: tensor<6x4xf32>)
// CHECK-NEXT: %[[DX:.*]] = cleave.gemm %[[G]], %[[W]], %[[C]] {alpha = 2.000000e+00 : f32, beta = 3.000000e+00 : f32} : (tensor<6x5xf32>, tensor<5x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[DW:.*]] = cleave.gemm %[[G]], %[[A]] {trans_a = true} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NEXT: return %[[DX]], %[[DW]]
func.func @backward(%a: tensor<6x4xf32>, %g: tensor<6x5xf32>, %w: tensor<5x4xf32>, %c: tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<5x4xf32>) {
  %wt = cleave.transpose %w {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %dx = cleave.gemm %g, %wt, %c {alpha = 2.0 : f32, beta = 3.0 : f32, trans_b = true} : (tensor<6x5xf32>, tensor<4x5xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %dwt = cleave.gemm %a, %g {trans_a = true} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %dw = cleave.transpose %dwt {perm = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  return %dx, %dw : tensor<6x4xf32>, tensor<5x4xf32>
}

// -----

// Left alone: a transpose something else reads too stays (the gemm reads
// the matrix itself); the transpose of a gemm with c (c would need
// transposing), or of one read twice; a batched transpose; a matmul whose
// transposed operand is not a matrix.
// CHECK-LABEL: func.func @kept
// CHECK: %[[T:.*]] = cleave.transpose %arg0 {perm = array<i64: 1, 0>}
// CHECK: cleave.gemm %arg1, %arg0 {trans_b = true}
// CHECK: %[[P:.*]] = cleave.gemm %arg1, %arg1, %arg2
// CHECK: cleave.transpose %[[P]] {perm = array<i64: 1, 0>}
// CHECK: %[[Q:.*]] = cleave.gemm %arg1, %arg1 :
// CHECK: cleave.transpose %[[Q]] {perm = array<i64: 1, 0>}
// CHECK: %[[B:.*]] = cleave.transpose %arg3 {perm = array<i64: 1, 0, 2>}
// CHECK: cleave.matmul %arg3, %[[B]] :
func.func @kept(%m: tensor<3x3xf32>, %n: tensor<3x3xf32>, %c: tensor<3x3xf32>, %s: tensor<3x3x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3x3xf32>) {
  %mt = cleave.transpose %m {perm = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %p0 = cleave.gemm %n, %mt : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %p = cleave.gemm %n, %n, %c : (tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %pt = cleave.transpose %p {perm = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %q = cleave.gemm %n, %n : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %qt = cleave.transpose %q {perm = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %st = cleave.transpose %s {perm = array<i64: 1, 0, 2>} : (tensor<3x3x3xf32>) -> tensor<3x3x3xf32>
  %b = cleave.matmul %s, %st : (tensor<3x3x3xf32>, tensor<3x3x3xf32>) -> tensor<3x3x3xf32>
  return %mt, %p0, %pt, %q, %qt, %b : tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3x3xf32>
}

// -----

// A matmul operand that is a batch of transposed matrices (its last two
// dims swapped, its batch kept: an attention's gradient products) is read
// in place with that operand's flag, on either side or both.
// CHECK-LABEL: func.func @batched
// CHECK-NOT: cleave.transpose
// CHECK: cleave.matmul %arg0, %arg1 {trans_b = true} : (tensor<2x4x8x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x8x32xf32>
// CHECK: cleave.matmul %arg2, %arg3 {trans_a = true} : (tensor<2x4x16x8xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x8x32xf32>
// CHECK: cleave.matmul %arg2, %arg1 {trans_a = true, trans_b = true} : (tensor<2x4x16x8xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x8x32xf32>
// CHECK-NOT: cleave.transpose
func.func @batched(%a: tensor<2x4x8x16xf32>, %b: tensor<2x4x32x16xf32>, %c: tensor<2x4x16x8xf32>, %d: tensor<2x4x16x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) {
  %bt = cleave.transpose %b {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x32x16xf32>) -> tensor<2x4x16x32xf32>
  %ct = cleave.transpose %c {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
  %x = cleave.matmul %a, %bt : (tensor<2x4x8x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x8x32xf32>
  %y = cleave.matmul %ct, %d : (tensor<2x4x8x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x8x32xf32>
  %z = cleave.matmul %ct, %bt : (tensor<2x4x8x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x8x32xf32>
  return %x, %y, %z : tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>
}
