// RUN: cleave-opt %s --split-input-file --cleave-fold-bias-adds | FileCheck %s

// A Linear layer on a batch of sequences as PyTorch exports it, once
// cleave-fold-transposes has made its MatMul a gemm over the rows: the bias
// becomes the gemm's c.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = cleave.gemm %{{.*}}, %arg1, %arg2 {trans_b = true} : (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK: %[[Y:.*]] = cleave.reshape %[[P]] {shape = array<i64: 2, 3, 5>}
// CHECK-NOT: cleave.add
// CHECK: return %[[Y]]

func.func @forward(%x: tensor<2x3x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<5x4xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<5xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<2x3x5xf32> {cleave.name = "y"}) {
  %rows = cleave.reshape %x {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %p = cleave.gemm %rows, %w {trans_b = true} : (tensor<6x4xf32>, tensor<5x4xf32>) -> tensor<6x5xf32>
  %s = cleave.reshape %p {shape = array<i64: 2, 3, 5>} : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %y = cleave.add %b, %s : (tensor<5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// The bias second, the product unreshaped, a row with a leading 1 (read as
// its one row), and a gemm whose beta said nothing without c.
// CHECK-LABEL: func.func @forward
// CHECK: %[[R:.*]] = cleave.reshape %arg2 {shape = array<i64: 5>} : (tensor<1x5xf32>) -> tensor<5xf32>
// CHECK: %[[P:.*]] = cleave.gemm %arg0, %arg1, %[[R]] : (tensor<6x4xf32>, tensor<4x5xf32>, tensor<5xf32>)
// CHECK-NOT: cleave.add
// CHECK: return %[[P]]

func.func @forward(%x: tensor<6x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x5xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<1x5xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<6x5xf32> {cleave.name = "y"}) {
  %p = cleave.gemm %x, %w {beta = 0.0 : f32} : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %y = cleave.add %p, %b : (tensor<6x5xf32>, tensor<1x5xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// A row made after the product: the product moves down to the add, after it.
// CHECK-LABEL: func.func @forward
// CHECK: %[[B:.*]] = cleave.mul %arg2, %arg2
// CHECK: %[[P:.*]] = cleave.gemm %arg0, %arg1, %[[B]] :
// CHECK-NOT: cleave.add
// CHECK: return %[[P]]

func.func @forward(%x: tensor<6x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x5xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<5xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<6x5xf32> {cleave.name = "y"}) {
  %p = cleave.gemm %x, %w : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %b2 = cleave.mul %b, %b : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %y = cleave.add %p, %b2 : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// What stays: a product read beside the add (a training step's forward,
// where the backward reads it: here returned), one scaled by alpha, one
// with an activation, one that adds a c already, an add of a column or of a
// whole matrix, a reshape that changes the rows' length, and a bf16 result
// (bf16 factors adding into a bf16 accumulator), which takes no f32 row.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-8: cleave.add

func.func @forward(%x: tensor<6x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x5xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<5xf32> {cleave.kind = "param", cleave.name = "b"},
                   %col: tensor<6x1xf32> {cleave.kind = "param", cleave.name = "col"},
                   %m: tensor<6x5xf32> {cleave.kind = "param", cleave.name = "m"},
                   %b10: tensor<10xf32> {cleave.kind = "param", cleave.name = "b10"})
    -> (tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>,
        tensor<6x5xf32>, tensor<6x5xf32>, tensor<3x10xf32>, tensor<6x5xf32>) {
  %p0 = cleave.gemm %x, %w : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %y0 = cleave.add %p0, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %p1 = cleave.gemm %x, %w {alpha = 2.0 : f32} : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %y1 = cleave.add %p1, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %p2 = cleave.gemm %x, %w {activation = "relu"} : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %y2 = cleave.add %p2, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %p3 = cleave.gemm %x, %w, %m : (tensor<6x4xf32>, tensor<4x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %y3 = cleave.add %p3, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %p4 = cleave.gemm %x, %w : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %y4 = cleave.add %p4, %col : (tensor<6x5xf32>, tensor<6x1xf32>) -> tensor<6x5xf32>
  %p5 = cleave.gemm %x, %w : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %y5 = cleave.add %p5, %m : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %xh = cleave.cast %x {to = bf16} : (tensor<6x4xf32>) -> tensor<6x4xbf16>
  %wh = cleave.cast %w {to = bf16} : (tensor<4x5xf32>) -> tensor<4x5xbf16>
  %acc = cleave.cast %m {to = bf16} : (tensor<6x5xf32>) -> tensor<6x5xbf16>
  %p6 = cleave.gemm %xh, %wh, %acc : (tensor<6x4xbf16>, tensor<4x5xbf16>, tensor<6x5xbf16>) -> tensor<6x5xbf16>
  %p6f = cleave.cast %p6 {to = f32} : (tensor<6x5xbf16>) -> tensor<6x5xf32>
  %y6 = cleave.add %p6f, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  %p7 = cleave.gemm %x, %w : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %r7 = cleave.reshape %p7 {shape = array<i64: 3, 10>} : (tensor<6x5xf32>) -> tensor<3x10xf32>
  %y7 = cleave.add %r7, %b10 : (tensor<3x10xf32>, tensor<10xf32>) -> tensor<3x10xf32>
  return %y0, %y1, %y2, %y3, %y4, %y5, %y6, %y7, %p0 : tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>, tensor<3x10xf32>, tensor<6x5xf32>
}

// -----

// bf16 factors (--precision bf16) sum into an f32 result: its row is added
// as the primitive writes, in f32 as the add did.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = cleave.gemm %{{.*}}, %{{.*}}, %arg2 : (tensor<6x4xbf16>, tensor<4x5xbf16>, tensor<5xf32>) -> tensor<6x5xf32>
// CHECK-NOT: cleave.add
// CHECK: return %[[P]]

func.func @forward(%x: tensor<6x4xf32> {cleave.kind = "input", cleave.name = "x"},
                   %w: tensor<4x5xf32> {cleave.kind = "param", cleave.name = "w"},
                   %b: tensor<5xf32> {cleave.kind = "param", cleave.name = "b"})
    -> (tensor<6x5xf32> {cleave.name = "y"}) {
  %xh = cleave.cast %x {to = bf16} : (tensor<6x4xf32>) -> tensor<6x4xbf16>
  %wh = cleave.cast %w {to = bf16} : (tensor<4x5xf32>) -> tensor<4x5xbf16>
  %p = cleave.gemm %xh, %wh : (tensor<6x4xbf16>, tensor<4x5xbf16>) -> tensor<6x5xf32>
  %y = cleave.add %p, %b : (tensor<6x5xf32>, tensor<5xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}
