// RUN: cleave-opt %s --split-input-file --cleave-unmerge-batch-dims | FileCheck %s

// OPT's attention scores: q, k and v [batch 2, heads 4, seq 3, dim 5] merged
// to [8, 3, 5], k transposed, the scores' product reshaped back to add the
// mask, merged again for the softmax, the product with v reshaped back. Every
// op runs on [2, 4, ...] instead, and no reshape is left.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x3x5xf32>, %[[K:.*]]: tensor<2x4x3x5xf32>, %[[V:.*]]: tensor<2x4x3x5xf32>, %[[MASK:.*]]: tensor<2x1x3x3xf32>)
// CHECK-NEXT: %[[KT:.*]] = cleave.transpose %[[K]] {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x3x5xf32>) -> tensor<2x4x5x3xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.matmul %[[Q]], %[[KT]] : (tensor<2x4x3x5xf32>, tensor<2x4x5x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[M:.*]] = cleave.add %[[S]], %[[MASK]]
// CHECK-NEXT: %[[P:.*]] = cleave.softmax %[[M]] {axis = 3 : i64} : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[O:.*]] = cleave.matmul %[[P]], %[[V]] : (tensor<2x4x3x3xf32>, tensor<2x4x3x5xf32>) -> tensor<2x4x3x5xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention(%q: tensor<2x4x3x5xf32>, %k: tensor<2x4x3x5xf32>, %v: tensor<2x4x3x5xf32>, %mask: tensor<2x1x3x3xf32>) -> tensor<2x4x3x5xf32> {
  %q3 = cleave.reshape %q {shape = array<i64: 8, 3, 5>} : (tensor<2x4x3x5xf32>) -> tensor<8x3x5xf32>
  %k3 = cleave.reshape %k {shape = array<i64: 8, 3, 5>} : (tensor<2x4x3x5xf32>) -> tensor<8x3x5xf32>
  %v3 = cleave.reshape %v {shape = array<i64: 8, 3, 5>} : (tensor<2x4x3x5xf32>) -> tensor<8x3x5xf32>
  %kt = cleave.transpose %k3 {perm = array<i64: 0, 2, 1>} : (tensor<8x3x5xf32>) -> tensor<8x5x3xf32>
  %s3 = cleave.matmul %q3, %kt : (tensor<8x3x5xf32>, tensor<8x5x3xf32>) -> tensor<8x3x3xf32>
  %s = cleave.reshape %s3 {shape = array<i64: 2, 4, 3, 3>} : (tensor<8x3x3xf32>) -> tensor<2x4x3x3xf32>
  %m = cleave.add %s, %mask : (tensor<2x4x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x4x3x3xf32>
  %m3 = cleave.reshape %m {shape = array<i64: 8, 3, 3>} : (tensor<2x4x3x3xf32>) -> tensor<8x3x3xf32>
  %p3 = cleave.softmax %m3 {axis = 2 : i64} : (tensor<8x3x3xf32>) -> tensor<8x3x3xf32>
  %o3 = cleave.matmul %p3, %v3 : (tensor<8x3x3xf32>, tensor<8x3x5xf32>) -> tensor<8x3x5xf32>
  %o = cleave.reshape %o3 {shape = array<i64: 2, 4, 3, 5>} : (tensor<8x3x5xf32>) -> tensor<2x4x3x5xf32>
  return %o : tensor<2x4x3x5xf32>
}

// -----

// A reshape of a merge to another shape reads the unmerged value directly,
// and a log-softmax moves past the merge as a softmax does.
// CHECK-LABEL: func.func @reshape_of_merge
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x3xf32>)
// CHECK-NEXT: %[[L:.*]] = cleave.log_softmax %[[X]] {axis = 2 : i64}
// CHECK-NEXT: %[[R:.*]] = cleave.reshape %[[L]] {shape = array<i64: 24>}
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_merge(%x: tensor<2x4x3xf32>) -> tensor<24xf32> {
  %m = cleave.reshape %x {shape = array<i64: 8, 3>} : (tensor<2x4x3xf32>) -> tensor<8x3xf32>
  %l = cleave.log_softmax %m {axis = 1 : i64} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %r = cleave.reshape %l {shape = array<i64: 24>} : (tensor<8x3xf32>) -> tensor<24xf32>
  return %r : tensor<24xf32>
}

// -----

// Left as they are: a softmax over the merged dim, a transpose that moves it,
// a product of merges of other leading dims, a product of two matrices that
// are merges (the merged dim is their rows, not a batch), and a merge returned or read by
// an op this pass does not move (the add): each still reads the merge.
// CHECK-LABEL: func.func @kept
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x3xf32>, %[[Y:.*]]: tensor<4x2x3xf32>, %[[Z:.*]]: tensor<8x3xf32>)
// CHECK-NEXT: %[[MX:.*]] = cleave.reshape %[[X]] {shape = array<i64: 8, 3>}
// CHECK-NEXT: %[[MY:.*]] = cleave.reshape %[[Y]] {shape = array<i64: 8, 3>}
// CHECK-NEXT: cleave.softmax %[[MX]] {axis = 0 : i64}
// CHECK-NEXT: cleave.transpose %[[MX]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: cleave.add %[[MX]], %[[Z]]
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[MY]]
// CHECK-NEXT: cleave.matmul %[[MX]], %[[T]]
// CHECK-NEXT: cleave.matmul %[[MX]], %[[MX]] {trans_b = true}
// CHECK: return
func.func @kept(%x: tensor<2x4x3xf32>, %y: tensor<4x2x3xf32>, %z: tensor<8x3xf32>) -> (tensor<8x3xf32>, tensor<3x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>) {
  %mx = cleave.reshape %x {shape = array<i64: 8, 3>} : (tensor<2x4x3xf32>) -> tensor<8x3xf32>
  %my = cleave.reshape %y {shape = array<i64: 8, 3>} : (tensor<4x2x3xf32>) -> tensor<8x3xf32>
  %s = cleave.softmax %mx {axis = 0 : i64} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %t = cleave.transpose %mx {perm = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
  %a = cleave.add %mx, %z : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
  %yt = cleave.transpose %my {perm = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
  %p = cleave.matmul %mx, %yt : (tensor<8x3xf32>, tensor<3x8xf32>) -> tensor<8x8xf32>
  %g = cleave.matmul %mx, %mx {trans_b = true} : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<8x8xf32>
  return %s, %t, %a, %p, %mx, %g : tensor<8x3xf32>, tensor<3x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>
}
