// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-accumulate-into-products)' | FileCheck %s
// RUN: cleave-opt %s -split-input-file --pass-pipeline='builtin.module(cleave-accumulate-into-products,cleave-memory-plan)' | FileCheck %s --check-prefix=PLAN

// A weight's gradient (a gemm, alpha and transposes kept) and a matrix
// matmul's, each added to its accumulator and assigned back, become the
// product with the accumulator as c and beta 1 (the default, not printed),
// either operand order;
// the memory plan then writes each straight into its slot (4x3 f32: 48
// bytes, 64 aligned; the 3x3 slot after it).
// CHECK-LABEL: func.func @weight_gradients
// CHECK-SAME: (%[[X:.*]]: tensor<5x4xf32>, %[[DY:.*]]: tensor<5x3xf32>, %[[A:.*]]: tensor<4x3xf32> {{.*}}, %[[B:.*]]: tensor<3x3xf32> {{.*}})
// CHECK-NEXT: %[[GA:.*]] = cleave.gemm %[[X]], %[[DY]], %[[A]] {alpha = 5.000000e-01 : f32, trans_a = true}
// CHECK-NEXT: cleave.assign %[[GA]] to %[[A]]
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[DY]]
// CHECK-NEXT: %[[GB:.*]] = cleave.gemm %[[T]], %[[DY]], %[[B]] :
// CHECK-NEXT: cleave.assign %[[GB]] to %[[B]]
// CHECK-NOT: cleave.add
// PLAN-LABEL: func.func @weight_gradients
// PLAN: cleave.gemm {{.*}}cleave.in_place_offsets = array<i64: 0>
// PLAN: cleave.gemm {{.*}}cleave.in_place_offsets = array<i64: 64>
func.func @weight_gradients(%x: tensor<5x4xf32>, %dy: tensor<5x3xf32>,
                            %acc_a: tensor<4x3xf32> {cleave.kind = "state", cleave.name = "acc_a"},
                            %acc_b: tensor<3x3xf32> {cleave.kind = "state", cleave.name = "acc_b"}) {
  %ga = cleave.gemm %x, %dy {alpha = 0.5 : f32, trans_a = true} : (tensor<5x4xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  %na = cleave.add %acc_a, %ga : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  cleave.assign %na to %acc_a : tensor<4x3xf32>
  %t = cleave.transpose %dy {perm = array<i64: 1, 0>} : (tensor<5x3xf32>) -> tensor<3x5xf32>
  %gb = cleave.matmul %t, %dy : (tensor<3x5xf32>, tensor<5x3xf32>) -> tensor<3x3xf32>
  %nb = cleave.add %gb, %acc_b : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  cleave.assign %nb to %acc_b : tensor<3x3xf32>
  return
}

// -----

// Left as they are: a product read elsewhere too, a gemm that already has
// a c, a batched matmul, a sum that broadcasts the product, and a sum not
// assigned to the slot it reads.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: cleave.add
func.func @kept(%x: tensor<4x4xf32>, %c: tensor<4x4xf32>, %xs: tensor<2x4x4xf32>, %r: tensor<1x4xf32>,
                %acc1: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc1"},
                %acc2: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc2"},
                %acc3: tensor<2x4x4xf32> {cleave.kind = "state", cleave.name = "acc3"},
                %acc4: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc4"},
                %acc5: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc5"}) -> tensor<4x4xf32> {
  %g1 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n1 = cleave.add %acc1, %g1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %n1 to %acc1 : tensor<4x4xf32>
  %g2 = cleave.gemm %x, %x, %c : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n2 = cleave.add %acc2, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %n2 to %acc2 : tensor<4x4xf32>
  %g3 = cleave.matmul %xs, %xs : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %n3 = cleave.add %acc3, %g3 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  cleave.assign %n3 to %acc3 : tensor<2x4x4xf32>
  %g4 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n4 = cleave.add %acc1, %g4 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %n4 to %acc4 : tensor<4x4xf32>
  %g5 = cleave.gemm %r, %x : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %n5 = cleave.add %acc5, %g5 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  cleave.assign %n5 to %acc5 : tensor<4x4xf32>
  return %g1 : tensor<4x4xf32>
}

// -----

// Accumulators kept in bf16 (cleave-narrow-gradient-accumulators: widened,
// added to, the sum rounded as it is stored) added to by products of bf16
// factors: the product writes the slot itself, bf16, the widening, the add
// and the rounding gone; the memory plan writes it in place (4x3 bf16: 24
// bytes, 64 aligned; the 3x3 slot after it).
// CHECK-LABEL: func.func @bf16_slots
// CHECK-SAME: (%[[X:.*]]: tensor<5x4xbf16>, %[[DY:.*]]: tensor<5x3xbf16>, %[[A:.*]]: tensor<4x3xbf16> {{.*}}, %[[B:.*]]: tensor<3x3xbf16> {{.*}})
// CHECK-NEXT: %[[GA:.*]] = cleave.gemm %[[X]], %[[DY]], %[[A]] {trans_a = true} : (tensor<5x4xbf16>, tensor<5x3xbf16>, tensor<4x3xbf16>) -> tensor<4x3xbf16>
// CHECK-NEXT: cleave.assign %[[GA]] to %[[A]]
// CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[DY]]
// CHECK-NEXT: %[[GB:.*]] = cleave.gemm %[[T]], %[[DY]], %[[B]] : (tensor<3x5xbf16>, tensor<5x3xbf16>, tensor<3x3xbf16>) -> tensor<3x3xbf16>
// CHECK-NEXT: cleave.assign %[[GB]] to %[[B]]
// CHECK-NOT: cleave.cast
// CHECK-NOT: cleave.add
// PLAN-LABEL: func.func @bf16_slots
// PLAN: cleave.gemm {{.*}}cleave.in_place_offsets = array<i64: 0>
// PLAN: cleave.gemm {{.*}}cleave.in_place_offsets = array<i64: 64>
func.func @bf16_slots(%x: tensor<5x4xbf16>, %dy: tensor<5x3xbf16>,
                      %acc_a: tensor<4x3xbf16> {cleave.kind = "state", cleave.name = "acc_a"},
                      %acc_b: tensor<3x3xbf16> {cleave.kind = "state", cleave.name = "acc_b"}) {
  %ga = cleave.gemm %x, %dy {trans_a = true} : (tensor<5x4xbf16>, tensor<5x3xbf16>) -> tensor<4x3xf32>
  %wa = cleave.cast %acc_a {to = f32} : (tensor<4x3xbf16>) -> tensor<4x3xf32>
  %na = cleave.add %wa, %ga : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %ra = cleave.cast %na {to = bf16} : (tensor<4x3xf32>) -> tensor<4x3xbf16>
  cleave.assign %ra to %acc_a : tensor<4x3xbf16>
  %t = cleave.transpose %dy {perm = array<i64: 1, 0>} : (tensor<5x3xbf16>) -> tensor<3x5xbf16>
  %gb = cleave.matmul %t, %dy : (tensor<3x5xbf16>, tensor<5x3xbf16>) -> tensor<3x3xf32>
  %wb = cleave.cast %acc_b {to = f32} : (tensor<3x3xbf16>) -> tensor<3x3xf32>
  %nb = cleave.add %gb, %wb : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  %rb = cleave.cast %nb {to = bf16} : (tensor<3x3xf32>) -> tensor<3x3xbf16>
  cleave.assign %rb to %acc_b : tensor<3x3xbf16>
  return
}

// -----

// Left as they are with bf16 slots: f32 factors (no product writes bf16
// from them), a widened slot read elsewhere too, an f32 sum read elsewhere
// too.
// CHECK-LABEL: func.func @bf16_kept
// CHECK-COUNT-3: cleave.add
func.func @bf16_kept(%x: tensor<4x4xf32>, %h: tensor<4x4xbf16>,
                     %acc1: tensor<4x4xbf16> {cleave.kind = "state", cleave.name = "acc1"},
                     %acc2: tensor<4x4xbf16> {cleave.kind = "state", cleave.name = "acc2"},
                     %acc3: tensor<4x4xbf16> {cleave.kind = "state", cleave.name = "acc3"}) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %g1 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %w1 = cleave.cast %acc1 {to = f32} : (tensor<4x4xbf16>) -> tensor<4x4xf32>
  %n1 = cleave.add %w1, %g1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r1 = cleave.cast %n1 {to = bf16} : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  cleave.assign %r1 to %acc1 : tensor<4x4xbf16>
  %g2 = cleave.gemm %h, %h : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xf32>
  %w2 = cleave.cast %acc2 {to = f32} : (tensor<4x4xbf16>) -> tensor<4x4xf32>
  %n2 = cleave.add %w2, %g2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r2 = cleave.cast %n2 {to = bf16} : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  cleave.assign %r2 to %acc2 : tensor<4x4xbf16>
  %g3 = cleave.gemm %h, %h : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xf32>
  %w3 = cleave.cast %acc3 {to = f32} : (tensor<4x4xbf16>) -> tensor<4x4xf32>
  %n3 = cleave.add %w3, %g3 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r3 = cleave.cast %n3 {to = bf16} : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  cleave.assign %r3 to %acc3 : tensor<4x4xbf16>
  return %w2, %n3 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// In a training step, a product that a microbatch reaches before anything
// else uses its accumulator, which @apply zeroes as its last use of it,
// writes the accumulator on its function's first call in a step
// (cleave.first_call_writes), and the zeroing goes: acc_a's; acc_b's first
// product (the second adds to what the first wrote); not acc_c's, which
// @forward reads first, nor acc_d's, which @apply reads after zeroing it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32>, %[[A:.*]]: tensor<4x4xf32> {{.*}}, %[[B:.*]]: tensor<4x4xf32> {{.*}}, %[[C:.*]]: tensor<4x4xf32> {{.*}}, %[[D:.*]]: tensor<4x4xf32> {{.*}})
// CHECK-NEXT: %[[GA:.*]] = cleave.gemm %[[X]], %[[X]], %[[A]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[GA]] to %[[A]]
// CHECK-NEXT: %[[GB1:.*]] = cleave.gemm %[[X]], %[[X]], %[[B]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[GB1]] to %[[B]]
// CHECK-NEXT: %[[GB2:.*]] = cleave.gemm %[[X]], %[[X]], %[[B]] {trans_a = true} :
// CHECK-NEXT: cleave.assign %[[GB2]] to %[[B]]
// CHECK-NEXT: %[[R:.*]] = cleave.add %[[C]], %[[X]]
// CHECK-NEXT: %[[GC:.*]] = cleave.gemm %[[X]], %[[X]], %[[C]] :
// CHECK-NEXT: cleave.assign %[[GC]] to %[[C]]
// CHECK-NEXT: %[[GD:.*]] = cleave.gemm %[[X]], %[[X]], %[[D]] :
// CHECK-NEXT: cleave.assign %[[GD]] to %[[D]]
// CHECK-LABEL: func.func @apply
// CHECK-SAME: (%[[PA:.*]]: tensor<4x4xf32> {{.*}}, %[[PB:.*]]: tensor<4x4xf32> {{.*}}, %[[PC:.*]]: tensor<4x4xf32> {{.*}}, %[[PD:.*]]: tensor<4x4xf32> {{.*}})
// CHECK-NOT: cleave.assign {{.*}} to %[[PA]]
// CHECK-NOT: cleave.assign {{.*}} to %[[PB]]
// CHECK: cleave.assign {{.*}} to %[[PC]]
// CHECK: cleave.assign {{.*}} to %[[PD]]
// CHECK: return
func.func @forward(%x: tensor<4x4xf32>,
                   %acc_a: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_a"},
                   %acc_b: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_b"},
                   %acc_c: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_c"},
                   %acc_d: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_d"}) -> tensor<4x4xf32> {
  %ga = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %na = cleave.add %acc_a, %ga : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %na to %acc_a : tensor<4x4xf32>
  %gb1 = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nb1 = cleave.add %acc_b, %gb1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nb1 to %acc_b : tensor<4x4xf32>
  %gb2 = cleave.gemm %x, %x {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nb2 = cleave.add %acc_b, %gb2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nb2 to %acc_b : tensor<4x4xf32>
  %r = cleave.add %acc_c, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %gc = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nc = cleave.add %acc_c, %gc : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nc to %acc_c : tensor<4x4xf32>
  %gd = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nd = cleave.add %acc_d, %gd : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nd to %acc_d : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
func.func @apply(%acc_a: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_a"},
                 %acc_b: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_b"},
                 %acc_c: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_c"},
                 %acc_d: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_d"}) -> tensor<4x4xf32> {
  %ab = cleave.add %acc_a, %acc_b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %abc = cleave.add %ab, %acc_c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %zeros = cleave.constant {value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  cleave.assign %zeros to %acc_a : tensor<4x4xf32>
  cleave.assign %zeros to %acc_b : tensor<4x4xf32>
  cleave.assign %zeros to %acc_c : tensor<4x4xf32>
  cleave.assign %zeros to %acc_d : tensor<4x4xf32>
  %all = cleave.add %abc, %acc_d : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %all : tensor<4x4xf32>
}

// -----

// A pipeline stage's @backward_weight: its product writes acc_w on the first
// call, no earlier function using acc_w; acc_v's adds, @backward having read
// it first.
// CHECK-LABEL: func.func @backward_weight
// CHECK: cleave.gemm {{.*}}{cleave.first_call_writes}
// CHECK-NOT: cleave.first_call_writes
// CHECK-LABEL: func.func @apply
// CHECK-NOT: cleave.assign {{.*}} to %arg0
// CHECK: cleave.assign {{.*}} to %arg1
func.func @backward(%x: tensor<4x4xf32>,
                    %acc_v: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_v"}) -> tensor<4x4xf32> {
  %r = cleave.add %acc_v, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
func.func @backward_weight(%x: tensor<4x4xf32>,
                           %acc_w: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_w"},
                           %acc_v: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_v"}) {
  %gw = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nw = cleave.add %acc_w, %gw : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nw to %acc_w : tensor<4x4xf32>
  %gv = cleave.gemm %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nv = cleave.add %acc_v, %gv : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nv to %acc_v : tensor<4x4xf32>
  return
}
func.func @apply(%acc_w: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_w"},
                 %acc_v: tensor<4x4xf32> {cleave.kind = "state", cleave.name = "acc_v"}) {
  %zeros = cleave.constant {value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  cleave.assign %zeros to %acc_w : tensor<4x4xf32>
  cleave.assign %zeros to %acc_v : tensor<4x4xf32>
  return
}

// -----

// ZeRO 1's accumulators, members of a flat gradient buffer that @apply
// zeroes whole: grad:w's product writes it on its first call, and the
// buffer's zeroing becomes that of its other member, grad:b (added to a
// value an elementwise chain makes: its elements from offset 16); the
// padding, elements 20 to 31, is never written, and the memory plan lays
// the view over the buffer's bytes (64 past its start).
// CHECK-LABEL: func.func @forward
// CHECK: cleave.gemm {{.*}}{cleave.first_call_writes, trans_a = true}
// CHECK-LABEL: func.func @apply
// CHECK-SAME: (%[[FLAT:.*]]: tensor<32xf32>
// CHECK: %[[SUM:.*]] = cleave.reduce_sum %[[FLAT]]
// CHECK-NEXT: %[[B:.*]] = cleave.elements %[[FLAT]][16] : tensor<32xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[ZEROS:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<4xf32>}
// CHECK-NEXT: cleave.assign %[[ZEROS]] to %[[B]] : tensor<4xf32>
// CHECK-NEXT: return %[[SUM]]
// PLAN-LABEL: func.func @apply
// PLAN: cleave.constant {{.*}}cleave.in_place_offsets = array<i64: 64>
func.func @forward(%x: tensor<4x4xf32>, %db: tensor<4xf32>,
                   %acc_w: tensor<4x4xf32> {cleave.accumulator, cleave.flat_member = "flat:grads", cleave.flat_offset = 0 : i64, cleave.kind = "state", cleave.name = "grad:w"},
                   %acc_b: tensor<4xf32> {cleave.accumulator, cleave.flat_member = "flat:grads", cleave.flat_offset = 16 : i64, cleave.kind = "state", cleave.name = "grad:b"}) {
  %gw = cleave.gemm %x, %x {trans_a = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nw = cleave.add %acc_w, %gw : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nw to %acc_w : tensor<4x4xf32>
  %sq = cleave.mul %db, %db : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %nb = cleave.add %acc_b, %sq : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %nb to %acc_b : tensor<4xf32>
  return
}
func.func @apply(%flat: tensor<32xf32> {cleave.flat_size = 32 : i64, cleave.kind = "state", cleave.name = "flat:grads"}) -> tensor<f32> {
  %sum = cleave.reduce_sum %flat {axes = array<i64: 0>, keepdims = false} : (tensor<32xf32>) -> tensor<f32>
  %zeros = cleave.constant {value = dense<0.0> : tensor<32xf32>} : tensor<32xf32>
  cleave.assign %zeros to %flat : tensor<32xf32>
  return %sum : tensor<f32>
}

// -----

// Accumulators added to by what no elementwise chain makes (a bias's column
// sum, a collective's result, an argument): the add copies on its first
// call (cleave.first_call_writes, the slot its lhs) and @apply's zeroing
// goes: acc_b's, acc_s's (the slot on the right before), acc_t's (added to
// twice: the second add adds to what the first wrote), acc_f's, a member of
// the flat buffer, whose zeroing then goes whole (every member written).
// Not acc_m's, added to a product of an elementwise chain (the add stays in
// the chain).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32>, %[[B:[^:]*]]: tensor<4xf32> {{.*}}, %[[S:[^:]*]]: tensor<4xf32> {{.*}}, %[[M:[^:]*]]: tensor<4x4xf32> {{.*}}, %[[T:[^:]*]]: tensor<4xf32> {{.*}}, %[[F:[^:]*]]: tensor<4xf32> {{.*}})
// CHECK-NEXT: %[[COLUMNS:.*]] = cleave.reduce_sum %[[X]]
// CHECK-NEXT: %[[NB:.*]] = cleave.add %[[B]], %[[COLUMNS]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[NB]] to %[[B]]
// CHECK-NEXT: %[[NS:.*]] = cleave.add %[[S]], %[[COLUMNS]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[NS]] to %[[S]]
// CHECK-NEXT: %[[SQ:.*]] = cleave.mul %[[X]], %[[X]]
// CHECK-NEXT: %[[NM:.*]] = cleave.add %[[M]], %[[SQ]] :
// CHECK-NEXT: cleave.assign %[[NM]] to %[[M]]
// CHECK-NEXT: %[[NT1:.*]] = cleave.add %[[T]], %[[COLUMNS]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[NT1]] to %[[T]]
// CHECK-NEXT: %[[NT2:.*]] = cleave.add %[[T]], %[[COLUMNS]] :
// CHECK-NEXT: cleave.assign %[[NT2]] to %[[T]]
// CHECK-NEXT: %[[NF:.*]] = cleave.add %[[F]], %[[COLUMNS]] {cleave.first_call_writes}
// CHECK-NEXT: cleave.assign %[[NF]] to %[[F]]
// CHECK-LABEL: func.func @apply
// CHECK-SAME: (%[[PB:[^:]*]]: tensor<4xf32> {{.*}}, %[[PS:[^:]*]]: tensor<4xf32> {{.*}}, %[[PM:[^:]*]]: tensor<4x4xf32> {{.*}}, %[[PT:[^:]*]]: tensor<4xf32> {{.*}}, %[[FLAT:[^:]*]]: tensor<16xf32> {{.*}})
// CHECK-NEXT: %[[ZEROS:.*]] = cleave.constant {value = dense<0.000000e+00> : tensor<4x4xf32>}
// CHECK-NEXT: cleave.assign %[[ZEROS]] to %[[PM]]
// CHECK-NEXT: return
func.func @forward(%x: tensor<4x4xf32>,
                   %acc_b: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_b"},
                   %acc_s: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_s"},
                   %acc_m: tensor<4x4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_m"},
                   %acc_t: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_t"},
                   %acc_f: tensor<4xf32> {cleave.accumulator, cleave.flat_member = "flat:grads", cleave.flat_offset = 0 : i64, cleave.kind = "state", cleave.name = "acc_f"}) {
  %columns = cleave.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : (tensor<4x4xf32>) -> tensor<4xf32>
  %nb = cleave.add %acc_b, %columns : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %nb to %acc_b : tensor<4xf32>
  %ns = cleave.add %columns, %acc_s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %ns to %acc_s : tensor<4xf32>
  %sq = cleave.mul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %nm = cleave.add %acc_m, %sq : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  cleave.assign %nm to %acc_m : tensor<4x4xf32>
  %nt1 = cleave.add %acc_t, %columns : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %nt1 to %acc_t : tensor<4xf32>
  %nt2 = cleave.add %acc_t, %columns : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %nt2 to %acc_t : tensor<4xf32>
  %nf = cleave.add %acc_f, %columns : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  cleave.assign %nf to %acc_f : tensor<4xf32>
  return
}
func.func @apply(%acc_b: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_b"},
                 %acc_s: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_s"},
                 %acc_m: tensor<4x4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_m"},
                 %acc_t: tensor<4xf32> {cleave.accumulator, cleave.kind = "state", cleave.name = "acc_t"},
                 %flat: tensor<16xf32> {cleave.flat_size = 16 : i64, cleave.kind = "state", cleave.name = "flat:grads"}) {
  %zeros = cleave.constant {value = dense<0.0> : tensor<4xf32>} : tensor<4xf32>
  %zeros_m = cleave.constant {value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %zeros_flat = cleave.constant {value = dense<0.0> : tensor<16xf32>} : tensor<16xf32>
  cleave.assign %zeros to %acc_b : tensor<4xf32>
  cleave.assign %zeros to %acc_s : tensor<4xf32>
  cleave.assign %zeros_m to %acc_m : tensor<4x4xf32>
  cleave.assign %zeros to %acc_t : tensor<4xf32>
  cleave.assign %zeros_flat to %flat : tensor<16xf32>
  return
}
