// RUN: cleave-opt %s --split-input-file -verify-diagnostics

func.func @not_an_accumulator(%w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w"}) {
  // expected-error@+1 {{operands must be gradient accumulators (function arguments marked cleave.accumulator)}}
  cleave.all_reduce_start %w on axis 0 : tensor<16xf32>
  return
}

// -----

func.func @not_an_argument(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"}) {
  %y = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error@+1 {{operands must be gradient accumulators}}
  cleave.all_reduce_start %y on axis 0 : tensor<16xf32>
  return
}

// -----

func.func @no_operand() {
  // expected-error@+1 {{needs an accumulator}}
  "cleave.all_reduce_start"() {axis = 0 : i64} : () -> ()
  return
}

// -----

func.func @negative_axis(%g: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator}) {
  // expected-error@+1 {{axis -1 is negative}}
  cleave.all_reduce_start %g on axis -1 : tensor<16xf32>
  return
}

// -----

func.func @not_a_flat_member(%g: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator}) {
  // expected-error@+1 {{operands must be members of a flat buffer (marked cleave.flat_offset)}}
  cleave.reduce_scatter_owned_start %g on axis 0 slices 8 : tensor<16xf32>
  return
}

// -----

func.func @empty_slices(%g: tensor<16xf32> {cleave.kind = "state", cleave.name = "grad:w", cleave.accumulator, cleave.flat_offset = 0 : i64}) {
  // expected-error@+1 {{slices of 0 elements}}
  cleave.reduce_scatter_owned_start %g on axis 0 slices 0 : tensor<16xf32>
  return
}

// -----

func.func @owned_not_an_accumulator(%w: tensor<16xf32> {cleave.kind = "param", cleave.name = "w", cleave.flat_offset = 0 : i64}) {
  // expected-error@+1 {{operands must be gradient accumulators}}
  cleave.reduce_scatter_owned_start %w on axis 0 slices 8 : tensor<16xf32>
  return
}

// -----

func.func @owned_part_of_no_concat(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"}) {
  %y = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error@+1 {{operands must be flat buffer members or consecutive parts of one cleave.concat along dim 0 made in place (cleave.parts_in_place)}}
  cleave.reduce_scatter_owned_start %y on axis 0 slices 8 : tensor<16xf32>
  return
}

// -----

func.func @owned_parts_not_in_place(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<32xf32> {
  %a = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error@+1 {{operands must be flat buffer members or consecutive parts}}
  cleave.reduce_scatter_owned_start %a, %b on axis 0 slices 16 : tensor<16xf32>, tensor<16xf32>
  %c = cleave.concat %a, %b {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  return %c : tensor<32xf32>
}

// -----

func.func @owned_parts_not_consecutive(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<48xf32> {
  %a = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %c = cleave.relu %x : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error@+1 {{operands must be flat buffer members or consecutive parts}}
  cleave.reduce_scatter_owned_start %a, %c on axis 0 slices 24 : tensor<16xf32>, tensor<16xf32>
  %d = cleave.concat %a, %b, %c {axis = 0 : i64, cleave.parts_in_place} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<48xf32>
  return %d : tensor<48xf32>
}

// -----

func.func @owned_parts_negative_axis(%x: tensor<16xf32> {cleave.kind = "input", cleave.name = "x"}) -> tensor<32xf32> {
  %a = cleave.neg %x : (tensor<16xf32>) -> tensor<16xf32>
  %b = cleave.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  // expected-error@+1 {{axis -1 is negative}}
  cleave.reduce_scatter_owned_start %a, %b on axis -1 slices 16 : tensor<16xf32>, tensor<16xf32>
  %c = cleave.concat %a, %b {axis = 0 : i64, cleave.parts_in_place} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  return %c : tensor<32xf32>
}
