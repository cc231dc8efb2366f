// RUN: cleave-opt %s -split-input-file --cleave-fuse-elementwise | FileCheck %s

// GELU's chain (div, erf, add, mul, mul) over one shape, its scalars
// broadcast: one op, whose outputs are the values read after it.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[R:.*]] = cleave.fused_elementwise %[[X]], %{{.*}}, %{{.*}}, %{{.*}} {program = "div 0 1;erf 4;add 5 2;mul 0 6;mul 7 3>8"} : (tensor<4x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r2 = cleave.constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %half = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %d = cleave.div %x, %r2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = cleave.erf %d : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = cleave.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = cleave.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A value of the chain read by an op outside it after the chain's end is
// one more output; the op that reads it stays where it is.
// CHECK-LABEL: func.func @two_outputs
// CHECK: %[[F:.*]]:2 = cleave.fused_elementwise %arg0, %arg1 {program = "mul 0 1;sqrt 2;neg 3>2,4"}
// CHECK-NEXT: %[[S:.*]] = cleave.reduce_sum %[[F]]#0
// CHECK-NEXT: return %[[F]]#1, %[[S]]
func.func @two_outputs(%a: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<16xf32>, tensor<f32>) {
  %m = cleave.mul %a, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %s = cleave.sqrt %m : (tensor<16xf32>) -> tensor<16xf32>
  %n = cleave.neg %s : (tensor<16xf32>) -> tensor<16xf32>
  %r = cleave.reduce_sum %m {axes = array<i64: 0>, keepdims = false} : (tensor<16xf32>) -> tensor<f32>
  return %n, %r : tensor<16xf32>, tensor<f32>
}

// -----

// A value of the chain read by an op outside it before the chain goes on
// would be computed too late: the chain stops there, and what comes after
// the reader is a chain of its own.
// CHECK-LABEL: func.func @read_between
// CHECK: %[[F:.*]] = cleave.fused_elementwise %arg0, %arg1 {program = "add 0 1;exp 2>3"}
// CHECK-NEXT: %[[S:.*]] = cleave.reduce_sum %[[F]]
// CHECK-NEXT: %[[G:.*]] = cleave.fused_elementwise %[[F]], %[[S]] {program = "sub 0 1;tanh 2>3"}
func.func @read_between(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %x = cleave.add %a, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %e = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %s = cleave.reduce_sum %e {axes = array<i64: 0>, keepdims = false} : (tensor<16xf32>) -> tensor<f32>
  %d = cleave.sub %e, %s : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %t = cleave.tanh %d : (tensor<16xf32>) -> tensor<16xf32>
  return %t : tensor<16xf32>
}

// -----

// Not fused: a broadcast of more than one element (a bias added to rows),
// another element type, a result of one element, and an op the kernel does
// not run (relu).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: cleave.fused_elementwise
func.func @left_alone(%x: tensor<4x8xf32>, %bias: tensor<8xf32>, %d: tensor<4x8xf64>,
                      %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf64>, tensor<f32>, tensor<4x8xf32>) {
  %a = cleave.add %x, %bias : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %b = cleave.exp %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = cleave.mul %d, %d : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %e = cleave.sqrt %c : (tensor<4x8xf64>) -> tensor<4x8xf64>
  %f = cleave.mul %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g = cleave.sqrt %f : (tensor<f32>) -> tensor<f32>
  %h = cleave.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %i = cleave.neg %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %b, %e, %g, %i : tensor<4x8xf32>, tensor<4x8xf64>, tensor<f32>, tensor<4x8xf32>
}

// -----

// A ReLU's gradient, where(greater(x, 0), g, 0), is one Gate instruction
// over x and g, fused alone too (one pass instead of two, the boolean mask
// never written), or into its chain; its greater and its zeros go.
// CHECK-LABEL: func.func @relu_gradient
// CHECK-SAME: (%[[X:.*]]: tensor<16xf32>, %[[G:.*]]: tensor<16xf32>, %[[S:.*]]: tensor<f32>)
// CHECK-NEXT: %[[A:.*]] = cleave.fused_elementwise %[[X]], %[[G]] {program = "gate 0 1>2"}
// CHECK-NEXT: %[[B:.*]] = cleave.fused_elementwise %[[X]], %[[G]], %[[S]] {program = "gate 0 1;mul 3 2>4"}
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @relu_gradient(%x: tensor<16xf32>, %g: tensor<16xf32>, %s: tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %c = cleave.greater %x, %zero : (tensor<16xf32>, tensor<f32>) -> tensor<16xi1>
  %r = cleave.where %c, %g, %zero : (tensor<16xi1>, tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %c2 = cleave.greater %x, %zero : (tensor<16xf32>, tensor<f32>) -> tensor<16xi1>
  %r2 = cleave.where %c2, %g, %zero : (tensor<16xi1>, tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %m = cleave.mul %r2, %s : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  return %r, %m : tensor<16xf32>, tensor<16xf32>
}

// -----

// Not a Gate: an else of -0 (a Gate gives +0), a threshold other than 0,
// and a condition read by another op too.
// CHECK-LABEL: func.func @not_gates
// CHECK-NOT: fused_elementwise
// CHECK-COUNT-3: cleave.where
// CHECK-NOT: fused_elementwise
func.func @not_gates(%x: tensor<16xf32>, %g: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xi1>) {
  %zero = cleave.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %negzero = cleave.constant {value = dense<-0.0> : tensor<f32>} : tensor<f32>
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %c = cleave.greater %x, %zero : (tensor<16xf32>, tensor<f32>) -> tensor<16xi1>
  %a = cleave.where %c, %g, %negzero : (tensor<16xi1>, tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %c1 = cleave.greater %x, %one : (tensor<16xf32>, tensor<f32>) -> tensor<16xi1>
  %b = cleave.where %c1, %g, %zero : (tensor<16xi1>, tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %c2 = cleave.greater %x, %zero : (tensor<16xf32>, tensor<f32>) -> tensor<16xi1>
  %d = cleave.where %c2, %g, %zero : (tensor<16xi1>, tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  return %a, %b, %d, %c2 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xi1>
}

// -----

// Any other where of f32 values is a Select: its condition (i1, per element
// or one for all) an input of the chain. fp16's guard of an update, the new
// value where the gradients were finite and the old one where not, joins
// the update's chain, whose outputs are then the chosen values alone; a
// where with nothing to fuse with stays itself.
// CHECK-LABEL: func.func @guarded_update
// CHECK-SAME: (%[[P:.*]]: tensor<16xf32>, %[[G:.*]]: tensor<16xf32>, %[[F:.*]]: tensor<i1>, %[[M:.*]]: tensor<16xi1>, %[[LR:.*]]: tensor<f32>)
// CHECK-NEXT: %[[U:.*]]:2 = cleave.fused_elementwise %[[LR]], %[[G]], %[[P]], %[[F]], %[[M]] {program = "mul 0 1;sub 2 5;select 3 6 2;select 4 7 1>7,8"}
// CHECK-NEXT: %[[W:.*]] = cleave.where %[[M]], %[[P]], %[[G]]
// CHECK-NEXT: return %[[U]]#0, %[[U]]#1, %[[W]]
func.func @guarded_update(%p: tensor<16xf32>, %g: tensor<16xf32>, %finite: tensor<i1>, %mask: tensor<16xi1>, %lr: tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %step = cleave.mul %lr, %g : (tensor<f32>, tensor<16xf32>) -> tensor<16xf32>
  %new = cleave.sub %p, %step : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %kept = cleave.where %finite, %new, %p : (tensor<i1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %masked = cleave.where %mask, %kept, %g : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %alone = cleave.where %mask, %p, %g : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %kept, %masked, %alone : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Casts between bf16 and f32 at a chain's ends: a bf16 gradient
// accumulator's widen, add and round is one op that reads the bf16 slot and
// writes bf16 (the same register, converted as the kernel reads and writes
// it), and an activation rounded for a product is written in bf16 beside
// its f32 value. A rounding inside a chain (to bf16 and back, Autocast's
// rounded factors) ends one chain and starts the next: the registers keep
// f32, so the value rounded is written and read back.
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: (%[[SLOT:[^:]*]]: tensor<4x8xbf16> {{.*}}, %[[G:[^:]*]]: tensor<4x8xf32>)
// CHECK: %[[R:.*]] = cleave.fused_elementwise %[[SLOT]], %[[G]] {program = "add 0 1>2"} : (tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: cleave.assign %[[R]] to %[[SLOT]]
func.func @accumulate(%slot: tensor<4x8xbf16> {cleave.kind = "state", cleave.name = "grad:w"}, %g: tensor<4x8xf32>) {
  %w = cleave.cast %slot {to = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %s = cleave.add %w, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = cleave.cast %s {to = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  cleave.assign %n to %slot : tensor<4x8xbf16>
  return
}

// CHECK-LABEL: func.func @activation
// CHECK: %[[R:.*]]:2 = cleave.fused_elementwise %arg0, %{{.*}} {program = "tanh 0;mul 2 1>3,3"} : (tensor<4x8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>)
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @activation(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %half = cleave.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %t = cleave.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = cleave.mul %t, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %n = cleave.cast %m {to = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  return %m, %n : tensor<4x8xf32>, tensor<4x8xbf16>
}

// CHECK-LABEL: func.func @rounded
// CHECK: %[[F:.*]] = cleave.fused_elementwise %arg0 {program = "tanh 0>1"} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[E:.*]] = cleave.fused_elementwise %[[F]] {program = "exp 0>1"} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[E]]
func.func @rounded(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = cleave.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = cleave.cast %t {to = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %w = cleave.cast %n {to = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %e = cleave.exp %w : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}

// Chains that would merge a rounding to bf16 with the cast back that reads
// it (through an op reading both sides) stay apart: the widened value must
// be the rounded one, which the first chain writes beside its f32 value.
// CHECK-LABEL: func.func @rounded_twice
// CHECK: %[[A:.*]]:2 = cleave.fused_elementwise %arg0 {program = "tanh 0>1,1"} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>)
// CHECK-NEXT: %[[M:.*]] = cleave.fused_elementwise %[[A]]#1, %[[A]]#0 {program = "add 0 1>2"} : (tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[M]]
func.func @rounded_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = cleave.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = cleave.cast %t {to = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %w = cleave.cast %n {to = f32} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %a = cleave.add %w, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a : tensor<4x8xf32>
}

// -----

// GELU's x / sqrt 2, read again after a kernel (the backward's, past its
// products) where x is read too: made again in the later chain from x
// rather than written by the first and read back, once for both of its
// readers there. The first chain writes only what else is read.
// CHECK-LABEL: func.func @made_again
// CHECK: %[[A:.*]] = cleave.fused_elementwise %arg0, %[[R2:.*]], %{{.*}} {program = "div 0 1;erf 3;add 4 2>5"}
// CHECK: cleave.reduce_sum %[[A]]
// CHECK: cleave.fused_elementwise %arg0, %[[R2]], %[[A]], %arg1 {program = "div 0 1;mul 4 4;mul 0 2;mul 6 5;add 7 3>8"}
func.func @made_again(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %r2 = cleave.constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %one = cleave.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %d = cleave.div %x, %r2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = cleave.erf %d : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = cleave.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = cleave.reduce_sum %a {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %dd = cleave.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %xa = cleave.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %p = cleave.mul %xa, %dd : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.add %p, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %y : tensor<f32>, tensor<4x8xf32>
}

// -----

// Not made again: x (a kernel's result, not an argument, which lives
// throughout) is not read after the kernel between, so the later chain
// would keep it alive longer.
// CHECK-LABEL: func.func @kept
// CHECK: %[[X:.*]] = cleave.transpose
// CHECK: %[[F:.*]]:2 = cleave.fused_elementwise %[[X]], %{{.*}}, %arg1 {program = "div 0 1;mul 3 2>3,4"}
// CHECK: cleave.reduce_sum %[[F]]#1
// CHECK: cleave.fused_elementwise %[[F]]#0, %arg1, %[[F]]#1 {program = "mul 0 0;add 3 1;add 4 2>5"}
func.func @kept(%t: tensor<8x4xf32>, %g: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %x = cleave.transpose %t {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %r2 = cleave.constant {value = dense<1.41421354> : tensor<f32>} : tensor<f32>
  %d = cleave.div %x, %r2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = cleave.mul %d, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = cleave.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %dd = cleave.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = cleave.add %dd, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = cleave.add %y, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %z : tensor<f32>, tensor<4x8xf32>
}

// -----

// Every reader after the kernel (an optimizer's gradient over its count,
// read past the step's scalar arithmetic): the op moves into their chain,
// and nothing is left of it before the kernel.
// CHECK-LABEL: func.func @moved
// CHECK-NOT: cleave.div
// CHECK: cleave.reduce_sum
// CHECK-NEXT: cleave.fused_elementwise %arg0, %arg1, %arg2 {program = "div 0 1;mul 3 2>4"}
// CHECK-NEXT: return
func.func @moved(%x: tensor<4x8xf32>, %count: tensor<f32>, %g: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %d = cleave.div %x, %count : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = cleave.reduce_sum %g {axes = array<i64: 0, 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<f32>
  %y = cleave.mul %d, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %y : tensor<f32>, tensor<4x8xf32>
}

// -----

// An accumulator's add that copies on its function's first call
// (cleave.first_call_writes) stays a kernel of its own: the chain before it
// ends at its operand.
// CHECK-LABEL: func.func @first_call_add
// CHECK: %[[F:.*]] = cleave.fused_elementwise %arg0 {program = "exp 0;neg 1>2"}
// CHECK-NEXT: %[[S:.*]] = cleave.add %arg1, %[[F]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[S]] to %arg1
func.func @first_call_add(%x: tensor<16xf32>,
                          %acc: tensor<16xf32> {cleave.kind = "state", cleave.name = "acc"}) {
  %e = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %n = cleave.neg %e : (tensor<16xf32>) -> tensor<16xf32>
  %s = cleave.add %acc, %n {cleave.first_call_writes} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  cleave.assign %s to %acc : tensor<16xf32>
  return
}
