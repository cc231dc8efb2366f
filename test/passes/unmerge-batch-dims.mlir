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

// GPT-NeoX's scores (torch's baddbmm): the product of the merges scaled by a
// scalar and added to zeros of the merged shape, a position bias of one
// batch added, then reshaped back. The elementwise ops run on the unmerged
// dims too: the scalar as it is, the zeros a constant of the unmerged
// shape, the bias reshaped to [1, 1, ...].
// CHECK-LABEL: func.func @scaled_scores
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x3x5xf32>, %[[K:.*]]: tensor<2x4x3x5xf32>, %[[B:.*]]: tensor<1x3x3xf32>)
// CHECK-NOT: tensor<8x3x3xf32>
// CHECK: %[[S:.*]] = cleave.matmul %[[Q]], %[[K]] {trans_b = true} : (tensor<2x4x3x5xf32>, tensor<2x4x3x5xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[HALF:.*]] = cleave.constant {value = dense<5.000000e-01> : tensor<f32>}
// CHECK-NEXT: %[[M:.*]] = cleave.mul %[[S]], %[[HALF]] : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: %[[ZEROS:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<2x4x3x3xf32>}
// CHECK-NEXT: %[[A:.*]] = cleave.add %[[M]], %[[ZEROS]] : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK: %[[WB:.*]] = cleave.reshape %[[B]] {shape = array<i64: 1, 1, 3, 3>}
// CHECK: %[[P:.*]] = cleave.add %[[A]], %[[WB]] : (tensor<2x4x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: return %[[P]]
func.func @scaled_scores(%q: tensor<2x4x3x5xf32>, %k: tensor<2x4x3x5xf32>, %b: tensor<1x3x3xf32>) -> tensor<2x4x3x3xf32> {
  %q3 = cleave.reshape %q {shape = array<i64: 8, 3, 5>} : (tensor<2x4x3x5xf32>) -> tensor<8x3x5xf32>
  %k3 = cleave.reshape %k {shape = array<i64: 8, 3, 5>} : (tensor<2x4x3x5xf32>) -> tensor<8x3x5xf32>
  %s3 = cleave.matmul %q3, %k3 {trans_b = true} : (tensor<8x3x5xf32>, tensor<8x3x5xf32>) -> tensor<8x3x3xf32>
  %half = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %m3 = cleave.mul %s3, %half : (tensor<8x3x3xf32>, tensor<f32>) -> tensor<8x3x3xf32>
  %zeros = cleave.constant {value = dense<0.0> : tensor<8x3x3xf32>} : tensor<8x3x3xf32>
  %a3 = cleave.add %m3, %zeros : (tensor<8x3x3xf32>, tensor<8x3x3xf32>) -> tensor<8x3x3xf32>
  %p3 = cleave.add %a3, %b : (tensor<8x3x3xf32>, tensor<1x3x3xf32>) -> tensor<8x3x3xf32>
  %p = cleave.reshape %p3 {shape = array<i64: 2, 4, 3, 3>} : (tensor<8x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %p : tensor<2x4x3x3xf32>
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
// are merges (the merged dim is their rows, not a batch), an add that
// broadcasts the merge itself (its shape is not the result's), and a merge returned or read by
// an op this pass does not move (the add): each still reads the merge.
// CHECK-LABEL: func.func @kept
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x3xf32>, %[[Y:.*]]: tensor<4x2x3xf32>, %[[Z:.*]]: tensor<8x3xf32>, %[[C:.*]]: tensor<2x4x1xf32>)
// CHECK-NEXT: %[[MX:.*]] = cleave.reshape %[[X]] {shape = array<i64: 8, 3>}
// CHECK-NEXT: %[[MY:.*]] = cleave.reshape %[[Y]] {shape = array<i64: 8, 3>}
// CHECK-NEXT: %[[MC:.*]] = cleave.reshape %[[C]] {shape = array<i64: 8, 1>}
// CHECK-NEXT: cleave.softmax %[[MX]] {axis = 0 : i64}
// CHECK-NEXT: cleave.transpose %[[MX]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: cleave.add %[[MC]], %[[Z]]
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[MY]]
// CHECK-NEXT: cleave.matmul %[[MX]], %[[T]]
// CHECK-NEXT: cleave.matmul %[[MX]], %[[MX]] {trans_b = true}
// CHECK: return
func.func @kept(%x: tensor<2x4x3xf32>, %y: tensor<4x2x3xf32>, %z: tensor<8x3xf32>, %c: tensor<2x4x1xf32>) -> (tensor<8x3xf32>, tensor<3x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>) {
  %mx = cleave.reshape %x {shape = array<i64: 8, 3>} : (tensor<2x4x3xf32>) -> tensor<8x3xf32>
  %my = cleave.reshape %y {shape = array<i64: 8, 3>} : (tensor<4x2x3xf32>) -> tensor<8x3xf32>
  %mc = cleave.reshape %c {shape = array<i64: 8, 1>} : (tensor<2x4x1xf32>) -> tensor<8x1xf32>
  %s = cleave.softmax %mx {axis = 0 : i64} : (tensor<8x3xf32>) -> tensor<8x3xf32>
  %t = cleave.transpose %mx {perm = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
  %a = cleave.add %mc, %z : (tensor<8x1xf32>, tensor<8x3xf32>) -> tensor<8x3xf32>
  %yt = cleave.transpose %my {perm = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
  %p = cleave.matmul %mx, %yt : (tensor<8x3xf32>, tensor<3x8xf32>) -> tensor<8x8xf32>
  %g = cleave.matmul %mx, %mx {trans_b = true} : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<8x8xf32>
  return %s, %t, %a, %p, %mx, %g : tensor<8x3xf32>, tensor<3x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>
}
