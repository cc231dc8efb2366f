// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-update-weight-copies)' | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-update-weight-copies,cleave-fuse-elementwise)' | FileCheck %s --check-prefix=FUSED

// Two weights @narrow_weights rounds to bf16, each updated once by @apply:
// @apply rounds each new value right after it is made and assigns the copy
// at the end, to a new argument that is the copy's state; @narrow_weights
// is left to run once. Fused, the rounding is an output of the update's own
// pass over memory.
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[A:[^:]*]]: tensor<16xf32> {cleave.kind = "param", cleave.name = "a"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"}
// CHECK-SAME: %[[COPY_A:[^:]*]]: tensor<16xbf16> {cleave.kind = "state", cleave.name = "bf16:a", cleave.state_of = "a", cleave.weight_copy}
// CHECK-SAME: %[[COPY_B:[^:]*]]: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:b", cleave.state_of = "b", cleave.weight_copy}
// CHECK: %[[NEW_A:.*]] = cleave.sub %[[A]], %{{.*}}
// CHECK-NEXT: %[[ROUNDED_A:.*]] = cleave.cast %[[NEW_A]] {to = bf16} : (tensor<16xf32>) -> tensor<16xbf16>
// CHECK: %[[NEW_B:.*]] = cleave.sub %[[B]], %{{.*}}
// CHECK-NEXT: %[[ROUNDED_B:.*]] = cleave.cast %[[NEW_B]] {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-NEXT: cleave.assign %[[NEW_A]] to %[[A]]
// CHECK-NEXT: cleave.assign %[[NEW_B]] to %[[B]]
// CHECK-NEXT: cleave.assign %[[ROUNDED_A]] to %[[COPY_A]]
// CHECK-NEXT: cleave.assign %[[ROUNDED_B]] to %[[COPY_B]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @narrow_weights
// CHECK-SAME: attributes {cleave.run_once}
// CHECK-COUNT-2: cleave.cast

// FUSED-LABEL: func.func @apply
// FUSED: %[[A_OUT:.*]]:2 = cleave.fused_elementwise {{.*}} : (tensor<16xf32>, tensor<f32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xbf16>)
// FUSED: %[[B_OUT:.*]]:2 = cleave.fused_elementwise {{.*}} : (tensor<8xf32>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xbf16>)
// FUSED-NOT: cleave.cast
// FUSED: cleave.assign %[[A_OUT]]#0
// FUSED: cleave.assign %[[B_OUT]]#0
// FUSED: cleave.assign %[[A_OUT]]#1
// FUSED: cleave.assign %[[B_OUT]]#1

func.func @apply(%a: tensor<16xf32> {cleave.kind = "param", cleave.name = "a"},
                 %b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                 %ga: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:a"},
                 %gb: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:b"},
                 %lr: tensor<f32> {cleave.kind = "input", cleave.name = "cleave.lr", cleave.input_index = 0 : i64}) {
  %sa = cleave.mul %ga, %lr : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
  %na = cleave.sub %a, %sa : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %sb = cleave.mul %gb, %lr : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %nb = cleave.sub %b, %sb : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %na to %a : tensor<16xf32>
  cleave.assign %nb to %b : tensor<8xf32>
  return
}

func.func @narrow_weights(%a: tensor<16xf32> {cleave.kind = "param", cleave.name = "a"},
                          %ca: tensor<16xbf16> {cleave.kind = "state", cleave.name = "bf16:a", cleave.state_of = "a", cleave.weight_copy},
                          %b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                          %cb: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:b", cleave.state_of = "b", cleave.weight_copy}) {
  %ra = cleave.cast %a {to = bf16} : (tensor<16xf32>) -> tensor<16xbf16>
  cleave.assign %ra to %ca : tensor<16xbf16>
  %rb = cleave.cast %b {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %rb to %cb : tensor<8xbf16>
  return
}

// -----

// ZeRO 1/2: @narrow_weights gathers a master slice's copy, which a step
// must gather again; the other copy is left to it too, before every step.
// CHECK-LABEL: func.func @apply
// CHECK-NOT: cleave.cast
// CHECK-NOT: bf16
// CHECK: return
// CHECK-LABEL: func.func @narrow_weights
// CHECK-NOT: cleave.run_once
// CHECK-SAME: {

shard.grid @mesh(shape = 2) {cleave.axes = ["dp"]}

func.func @apply(%a: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"},
                 %b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                 %ga: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:a"},
                 %gb: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:b"}) {
  %na = cleave.sub %a, %ga : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %nb = cleave.sub %b, %gb : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %na to %a : tensor<8xf32>
  cleave.assign %nb to %b : tensor<8xf32>
  return
}

func.func @narrow_weights(%a: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"},
                          %ca: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:a", cleave.state_of = "a", cleave.weight_copy},
                          %b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                          %cb: tensor<16xbf16> {cleave.kind = "state", cleave.name = "bf16:b", cleave.state_of = "b", cleave.weight_copy, cleave.whole_state}) {
  %ra = cleave.cast %a {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %ra to %ca : tensor<8xbf16>
  %rb = cleave.cast %b {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  %gathered = shard.all_gather %rb on @mesh grid_axes = [0] gather_axis = 0 : tensor<8xbf16> -> tensor<16xbf16>
  cleave.assign %gathered to %cb : tensor<16xbf16>
  return
}

// -----

// A weight @apply writes in chunks (cleave.elements views) has no one new
// value to round: @narrow_weights keeps making every copy.
// CHECK-LABEL: func.func @apply
// CHECK-NOT: cleave.cast
// CHECK: return
// CHECK-LABEL: func.func @narrow_weights
// CHECK-NOT: cleave.run_once
// CHECK-SAME: {

func.func @apply(%a: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"},
                 %ga: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:a"}) {
  %na = cleave.sub %a, %ga : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %lo = cleave.elements %a[0] : tensor<8xf32> -> tensor<4xf32>
  %hi = cleave.elements %a[4] : tensor<8xf32> -> tensor<4xf32>
  %nlo = cleave.elements %na[0] : tensor<8xf32> -> tensor<4xf32>
  %nhi = cleave.elements %na[4] : tensor<8xf32> -> tensor<4xf32>
  cleave.assign %nlo to %lo : tensor<4xf32>
  cleave.assign %nhi to %hi : tensor<4xf32>
  return
}

func.func @narrow_weights(%a: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"},
                          %ca: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:a", cleave.state_of = "a", cleave.weight_copy}) {
  %ra = cleave.cast %a {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %ra to %ca : tensor<8xbf16>
  return
}

// -----

// Nor does one it assigns twice.
// CHECK-LABEL: func.func @apply
// CHECK-NOT: cleave.cast
// CHECK: return
// CHECK-LABEL: func.func @narrow_weights
// CHECK-NOT: cleave.run_once
// CHECK-SAME: {

func.func @apply(%b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                 %gb: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:b"}) {
  %nb = cleave.sub %b, %gb : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %nb2 = cleave.sub %nb, %gb : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %nb to %b : tensor<8xf32>
  cleave.assign %nb2 to %b : tensor<8xf32>
  return
}

func.func @narrow_weights(%b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                          %cb: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:b", cleave.state_of = "b", cleave.weight_copy}) {
  %rb = cleave.cast %b {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %rb to %cb : tensor<8xbf16>
  return
}

// -----

// A frozen weight (nothing writes it) keeps the copy made once: only the
// updated weight's is rounded by @apply, and @narrow_weights runs once.
// CHECK-LABEL: func.func @apply
// CHECK-SAME: %[[A:[^:]*]]: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"}
// CHECK-SAME: %[[COPY_A:[^:]*]]: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:a"
// CHECK-NOT: bf16:frozen
// CHECK: %[[NEW_A:.*]] = cleave.sub
// CHECK-NEXT: %[[ROUNDED_A:.*]] = cleave.cast %[[NEW_A]] {to = bf16}
// CHECK-NEXT: cleave.assign %[[NEW_A]] to %[[A]]
// CHECK-NEXT: cleave.assign %[[ROUNDED_A]] to %[[COPY_A]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @narrow_weights
// CHECK-SAME: attributes {cleave.run_once}

func.func @apply(%a: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"},
                 %ga: tensor<8xf32> {cleave.kind = "state", cleave.name = "grad:a"}) {
  %na = cleave.sub %a, %ga : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %na to %a : tensor<8xf32>
  return
}

func.func @narrow_weights(%a: tensor<8xf32> {cleave.kind = "param", cleave.name = "a"},
                          %ca: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:a", cleave.state_of = "a", cleave.weight_copy},
                          %f: tensor<8xf32> {cleave.kind = "param", cleave.name = "frozen"},
                          %cf: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:frozen", cleave.state_of = "frozen", cleave.weight_copy}) {
  %ra = cleave.cast %a {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %ra to %ca : tensor<8xbf16>
  %rf = cleave.cast %f {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %rf to %cf : tensor<8xbf16>
  return
}

// -----

// A parameter written in another function (a training_info step updates
// in @forward) leaves every copy to @narrow_weights before each step.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cleave.cast
// CHECK-LABEL: func.func @apply
// CHECK-NOT: cleave.cast
// CHECK-LABEL: func.func @narrow_weights
// CHECK-NOT: cleave.run_once
// CHECK-SAME: {

func.func @forward(%b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                   %gb: tensor<8xf32> {cleave.kind = "input", cleave.name = "g", cleave.input_index = 0 : i64}) {
  %nb = cleave.sub %b, %gb : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  cleave.assign %nb to %b : tensor<8xf32>
  return
}

func.func @apply() {
  return
}

func.func @narrow_weights(%b: tensor<8xf32> {cleave.kind = "param", cleave.name = "b"},
                          %cb: tensor<8xbf16> {cleave.kind = "state", cleave.name = "bf16:b", cleave.state_of = "b", cleave.weight_copy}) {
  %rb = cleave.cast %b {to = bf16} : (tensor<8xf32>) -> tensor<8xbf16>
  cleave.assign %rb to %cb : tensor<8xbf16>
  return
}
