// RUN: cleave-opt %s --split-input-file --cleave-fuse-softmax | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-fuse-softmax,cleave-memory-plan,cleave-lower-to-emitc)' | FileCheck %s --check-prefix=LOWERED

// The attention's scores as exporters spell them, forward and backward: the
// scale, the causal mask and the softmax become one op each way.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = cleave.scaled_masked_softmax %arg0 mask(%arg1 : tensor<4x4xi1>) {fill = 0xFF800000 : f32, scale = 1.250000e-01 : f32} : tensor<2x3x4x4xf32> -> tensor<2x3x4x4xf32>
// CHECK: %[[DX:.*]] = cleave.scaled_masked_softmax_grad %[[Y]], %arg2, %arg1 {scale = 1.250000e-01 : f32}
// CHECK-NOT: cleave.softmax
// CHECK-NOT: cleave.where
// CHECK-NOT: cleave.mul
// CHECK: return %[[Y]], %[[DX]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}) {args = [{{.*}}#emitc.opaque<"0.125f">, #emitc.opaque<"false">, #emitc.opaque<"-__builtin_inff()">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax_grad"({{.*}}) {args = [{{.*}}#emitc.opaque<"0.125f">, #emitc.opaque<"false">, #emitc.opaque<"false">]}

func.func @forward(%scores: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "scores"},
                     %future: tensor<4x4xi1> {cleave.kind = "input", cleave.name = "future"},
                     %dy: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "dy"})
    -> (tensor<2x3x4x4xf32> {cleave.name = "y"}, tensor<2x3x4x4xf32> {cleave.name = "dx"}) {
  %scale = cleave.constant {value = dense<0.125> : tensor<f32>} : tensor<f32>
  %hidden = cleave.constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %scaled = cleave.mul %scores, %scale : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %masked = cleave.where %future, %hidden, %scaled : (tensor<4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = cleave.softmax %masked {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %g = cleave.softmax_grad %y, %dy {axis = 3 : i64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %gm = cleave.where %future, %zero, %g : (tensor<4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %dx = cleave.mul %scale, %gm : (tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %y, %dx : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}

// -----

// Without a scale (or with one that something else reads too), the mask
// and the softmax still go together, with scale 1; so does the gradient
// without its product.
// CHECK-LABEL: func.func @forward
// CHECK: %[[S:.*]] = cleave.mul %arg0
// CHECK: %[[Y:.*]] = cleave.scaled_masked_softmax %[[S]] mask(%arg1 : {{.*}}) {fill = -1.000000e+09 : f32, scale = 1.000000e+00 : f32}
// CHECK: %[[DX:.*]] = cleave.scaled_masked_softmax_grad %[[Y]], %arg2, %arg1 {scale = 1.000000e+00 : f32}
// CHECK: return %[[S]], %[[Y]], %[[DX]]

// LOWERED-LABEL: emitc.func @cleave_forward
func.func @forward(%scores: tensor<2x2x8xf32> {cleave.kind = "input", cleave.name = "scores"},
                    %pad: tensor<2x1x8xi1> {cleave.kind = "input", cleave.name = "pad"},
                    %dy: tensor<2x2x8xf32> {cleave.kind = "input", cleave.name = "dy"})
    -> (tensor<2x2x8xf32> {cleave.name = "s"}, tensor<2x2x8xf32> {cleave.name = "y"},
        tensor<2x2x8xf32> {cleave.name = "dx"}) {
  %scale = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %hidden = cleave.constant {value = dense<-1.0e9> : tensor<f32>} : tensor<f32>
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %scaled = cleave.mul %scores, %scale : (tensor<2x2x8xf32>, tensor<f32>) -> tensor<2x2x8xf32>
  %masked = cleave.where %pad, %hidden, %scaled : (tensor<2x1x8xi1>, tensor<f32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %y = cleave.softmax %masked {axis = 2 : i64} : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %g = cleave.softmax_grad %y, %dy {axis = 2 : i64} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %dx = cleave.where %pad, %zero, %g : (tensor<2x1x8xi1>, tensor<f32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  return %scaled, %y, %dx : tensor<2x2x8xf32>, tensor<2x2x8xf32>, tensor<2x2x8xf32>
}

// -----

// Left as they are: a softmax along another dim than the last; a softmax
// of an unscaled, unmasked value; f64 scores (the fused ops hold their
// constants in f32); a masked value read beside the softmax; a gradient
// masked by something else than zero.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: scaled_masked_softmax
// CHECK: return

// LOWERED-LABEL: emitc.func @cleave_forward
func.func @forward(%scores: tensor<4x4xf32> {cleave.kind = "input", cleave.name = "scores"},
                   %wide: tensor<4x4xf64> {cleave.kind = "input", cleave.name = "wide"},
                   %future: tensor<4x4xi1> {cleave.kind = "input", cleave.name = "future"})
    -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf64>, tensor<4x4xf32>, tensor<4x4xf32>,
        tensor<4x4xf32>) {
  %hidden = cleave.constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %wideHidden = cleave.constant {value = dense<0xFFF0000000000000> : tensor<f64>} : tensor<f64>
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %m0 = cleave.where %future, %hidden, %scores : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %columns = cleave.softmax %m0 {axis = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %kept = cleave.softmax %scores {axis = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = cleave.where %future, %wideHidden, %wide : (tensor<4x4xi1>, tensor<f64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  %doubles = cleave.softmax %m2 {axis = 1 : i64} : (tensor<4x4xf64>) -> tensor<4x4xf64>
  %m3 = cleave.where %future, %hidden, %scores : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %read = cleave.softmax %m3 {axis = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = cleave.softmax_grad %read, %scores {axis = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %ones = cleave.where %future, %one, %g : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %columns, %kept, %doubles, %m3, %read, %ones : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf64>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Torch exports the scale as a division, x / sqrt(d), and its gradient as
// one too: the fused ops divide. A constant divided by the scores is no
// scale: the mask and softmax go together without it.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = cleave.scaled_masked_softmax %arg0 mask(%arg1 : {{.*}}) {divide, fill = 0xFF800000 : f32, scale = 8.000000e+00 : f32}
// CHECK: %[[DX:.*]] = cleave.scaled_masked_softmax_grad %[[Y]], %arg2, %arg1 {divide, scale = 8.000000e+00 : f32}
// CHECK: %[[R:.*]] = cleave.div %{{.*}}, %arg0
// CHECK: cleave.scaled_masked_softmax %[[R]] mask(%arg1 : {{.*}}) {fill = 0xFF800000 : f32, scale = 1.000000e+00 : f32}
// CHECK-NOT: cleave.div
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}) {args = [{{.*}}#emitc.opaque<"8.0f">, #emitc.opaque<"true">, #emitc.opaque<"-__builtin_inff()">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax_grad"({{.*}}) {args = [{{.*}}#emitc.opaque<"8.0f">, #emitc.opaque<"true">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}) {args = [{{.*}}#emitc.opaque<"1.0f">, #emitc.opaque<"false">, #emitc.opaque<"-__builtin_inff()">, #emitc.opaque<"false">]}

func.func @forward(%scores: tensor<2x4x4xf32> {cleave.kind = "input", cleave.name = "scores"},
                   %future: tensor<4x4xi1> {cleave.kind = "input", cleave.name = "future"},
                   %dy: tensor<2x4x4xf32> {cleave.kind = "input", cleave.name = "dy"})
    -> (tensor<2x4x4xf32> {cleave.name = "y"}, tensor<2x4x4xf32> {cleave.name = "dx"},
        tensor<2x4x4xf32> {cleave.name = "r"}) {
  %root = cleave.constant {value = dense<8.0> : tensor<f32>} : tensor<f32>
  %hidden = cleave.constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %scaled = cleave.div %scores, %root : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %masked = cleave.where %future, %hidden, %scaled : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %y = cleave.softmax %masked {axis = 2 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %g = cleave.softmax_grad %y, %dy {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %gm = cleave.where %future, %zero, %g : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %dx = cleave.div %gm, %root : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %recip = cleave.div %root, %scores : (tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %m2 = cleave.where %future, %hidden, %recip : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %r = cleave.softmax %m2 {axis = 2 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %y, %dx, %r : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// transformers' GPT-2 keeps what its causal mask marks, where(mask, scores,
// lowest float), and ViT scales without a mask: both fuse, the first with
// `mask_keeps`, the second without a mask, forward and backward.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = cleave.scaled_masked_softmax %arg0 mask(%arg1 : {{.*}}) {divide, fill = -3.40282347E+38 : f32, mask_keeps, scale = 4.000000e+00 : f32}
// CHECK: %[[DX:.*]] = cleave.scaled_masked_softmax_grad %[[Y]], %arg2, %arg1 {divide, mask_keeps, scale = 4.000000e+00 : f32}
// CHECK: %[[V:.*]] = cleave.scaled_masked_softmax %arg0 {divide, fill = 0.000000e+00 : f32, scale = 4.000000e+00 : f32} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK: %[[DV:.*]] = cleave.scaled_masked_softmax_grad %[[V]], %arg2 {divide, scale = 4.000000e+00 : f32} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NOT: cleave.where
// CHECK-NOT: cleave.div
// CHECK: return %[[Y]], %[[DX]], %[[V]], %[[DV]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}) {args = [{{.*}}#emitc.opaque<"4.0f">, #emitc.opaque<"true">, #emitc.opaque<"-3.40282347e+38f">, #emitc.opaque<"true">]}
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax_grad"({{.*}}) {args = [{{.*}}#emitc.opaque<"4.0f">, #emitc.opaque<"true">, #emitc.opaque<"true">]}
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"nullptr">, 2 : index, #emitc.opaque<"4.0f">, #emitc.opaque<"true">, #emitc.opaque<"0.0f">, #emitc.opaque<"false">]}

func.func @forward(%scores: tensor<2x4x4xf32> {cleave.kind = "input", cleave.name = "scores"},
                   %causal: tensor<1x4x4xi1> {cleave.kind = "input", cleave.name = "causal"},
                   %dy: tensor<2x4x4xf32> {cleave.kind = "input", cleave.name = "dy"})
    -> (tensor<2x4x4xf32> {cleave.name = "y"}, tensor<2x4x4xf32> {cleave.name = "dx"},
        tensor<2x4x4xf32> {cleave.name = "v"}, tensor<2x4x4xf32> {cleave.name = "dv"}) {
  %root = cleave.constant {value = dense<4.0> : tensor<f32>} : tensor<f32>
  %lowest = cleave.constant {value = dense<-3.40282347E+38> : tensor<f32>} : tensor<f32>
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %scaled = cleave.div %scores, %root : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %masked = cleave.where %causal, %scaled, %lowest : (tensor<1x4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %y = cleave.softmax %masked {axis = 2 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %g = cleave.softmax_grad %y, %dy {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %gm = cleave.where %causal, %g, %zero : (tensor<1x4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %dx = cleave.div %gm, %root : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %s2 = cleave.div %scores, %root : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %v = cleave.softmax %s2 {axis = 2 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %g2 = cleave.softmax_grad %v, %dy {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %dv = cleave.div %g2, %root : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  return %y, %dx, %v, %dv : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Additive masks and position biases: BERT adds its mask to the divided
// scores (add(scores, bias)), Llama as add(bias, scores) here, T5 adds one
// position bias of the scores' shape, read by two softmaxes, to unscaled
// scores; a bias and a mask together. The bias is an operand of the fused
// op; the backward (the add's gradient passes through) fuses as before.
// CHECK-LABEL: func.func @forward
// CHECK: %[[B:.*]] = cleave.scaled_masked_softmax %arg0 bias(%arg1 : tensor<2x1x1x4xf32>) {divide, fill = 0.000000e+00 : f32, scale = 8.000000e+00 : f32} : tensor<2x3x4x4xf32> -> tensor<2x3x4x4xf32>
// CHECK: %[[DB:.*]] = cleave.scaled_masked_softmax_grad %[[B]], %arg4 {divide, scale = 8.000000e+00 : f32}
// CHECK: %[[L:.*]] = cleave.scaled_masked_softmax %arg0 bias(%arg2 : tensor<2x1x4x4xf32>) {fill = 0.000000e+00 : f32, scale = 1.250000e-01 : f32}
// CHECK: %[[T1:.*]] = cleave.scaled_masked_softmax %arg6 bias(%arg3 : tensor<2x3x4x4xf32>) {fill = 0.000000e+00 : f32, scale = 1.000000e+00 : f32}
// CHECK: %[[T2:.*]] = cleave.scaled_masked_softmax %arg7 bias(%arg3 : tensor<2x3x4x4xf32>) {fill = 0.000000e+00 : f32, scale = 1.000000e+00 : f32}
// CHECK: %[[M:.*]] = cleave.scaled_masked_softmax %arg0 mask(%arg5 : tensor<4x4xi1>) bias(%arg1 : tensor<2x1x1x4xf32>) {fill = 0xFF800000 : f32, scale = 1.250000e-01 : f32}
// CHECK-NOT: cleave.add
// CHECK-NOT: cleave.softmax
// CHECK: return %[[B]], %[[DB]], %[[L]], %[[T1]], %[[T2]], %[[M]]
// LOWERED-LABEL: emitc.func @cleave_forward
// LOWERED: %[[BIAS:.*]] = call_opaque "cleave::rt::some"
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}, %[[BIAS]], {{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"nullptr">, 2 : index, 3 : index, #emitc.opaque<"8.0f">, #emitc.opaque<"true">, #emitc.opaque<"0.0f">, #emitc.opaque<"false">]}
// LOWERED: call_opaque "cleave::rt::cpu::scaled_masked_softmax"({{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, #emitc.opaque<"0.125f">, #emitc.opaque<"false">, #emitc.opaque<"-__builtin_inff()">, #emitc.opaque<"false">]}

func.func @forward(%scores: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "scores"},
                   %pad: tensor<2x1x1x4xf32> {cleave.kind = "input", cleave.name = "pad"},
                   %causal: tensor<2x1x4x4xf32> {cleave.kind = "input", cleave.name = "causal"},
                   %position: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "position"},
                   %other: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "other"},
                   %future: tensor<4x4xi1> {cleave.kind = "input", cleave.name = "future"},
                   %qk1: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "qk1"},
                   %qk2: tensor<2x3x4x4xf32> {cleave.kind = "input", cleave.name = "qk2"})
    -> (tensor<2x3x4x4xf32> {cleave.name = "b"}, tensor<2x3x4x4xf32> {cleave.name = "db"},
        tensor<2x3x4x4xf32> {cleave.name = "l"}, tensor<2x3x4x4xf32> {cleave.name = "t1"},
        tensor<2x3x4x4xf32> {cleave.name = "t2"}, tensor<2x3x4x4xf32> {cleave.name = "m"}) {
  %root = cleave.constant {value = dense<8.0> : tensor<f32>} : tensor<f32>
  %scale = cleave.constant {value = dense<0.125> : tensor<f32>} : tensor<f32>
  %hidden = cleave.constant {value = dense<0xFF800000> : tensor<f32>} : tensor<f32>
  %d = cleave.div %scores, %root : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %sb = cleave.add %d, %pad : (tensor<2x3x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x3x4x4xf32>
  %b = cleave.softmax %sb {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %g = cleave.softmax_grad %b, %other {axis = 3 : i64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %db = cleave.div %g, %root : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %m1 = cleave.mul %scores, %scale : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %sl = cleave.add %causal, %m1 : (tensor<2x1x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %l = cleave.softmax %sl {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %st1 = cleave.add %qk1, %position : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %t1 = cleave.softmax %st1 {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %st2 = cleave.add %position, %qk2 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %t2 = cleave.softmax %st2 {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %m2 = cleave.mul %scores, %scale : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %sm = cleave.add %m2, %pad : (tensor<2x3x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x3x4x4xf32>
  %mm = cleave.where %future, %hidden, %sm : (tensor<4x4xi1>, tensor<f32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %m = cleave.softmax %mm {axis = 3 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %b, %db, %l, %t1, %t2, %m : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
}

// -----

// An add of a value to itself, or of two values that something else reads
// too, is left alone: the softmax stays.
// CHECK-LABEL: func.func @forward
// CHECK: cleave.add
// CHECK: cleave.softmax
// CHECK: cleave.add
// CHECK: cleave.softmax
// CHECK-NOT: scaled_masked_softmax

func.func @forward(%scores: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "scores"},
                   %bias: tensor<2x4xf32> {cleave.kind = "input", cleave.name = "bias"})
    -> (tensor<2x4xf32> {cleave.name = "y"}, tensor<2x4xf32> {cleave.name = "s"},
        tensor<2x4xf32> {cleave.name = "z"}, tensor<2x4xf32> {cleave.name = "b"}) {
  %scale = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %s = cleave.mul %scores, %scale : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %a = cleave.add %s, %s : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = cleave.softmax %a {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %a2 = cleave.add %scores, %bias : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = cleave.softmax %a2 {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y, %s, %z, %bias : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
