// --print-ir-after-all dumps the IR to stderr after every pass, including the last one;
// stdout carries only the final program.
// RUN: cann-opt %s -p cse,dce --print-ir-after-all 2>&1 >/dev/null | filecheck %s
// RUN: cann-opt %s -p cse,dce --print-ir-after-all 2>/dev/null | filecheck %s --check-prefix=OUT
// RUN: cann-opt %s -p cse,dce --time-passes 2>&1 >/dev/null | filecheck %s --check-prefix=TIME

// CHECK:      // -----// IR Dump After cse //----- //
// CHECK:        %1 = arith.muli %0, %0 : i32
// CHECK:      // -----// IR Dump After dce //----- //
// CHECK-NEXT: builtin.module {
// CHECK-NOT:  IR Dump

// OUT-NOT:    IR Dump
// OUT:        builtin.module {
// OUT:          %1 = arith.muli %0, %0 : i32
// OUT-NOT:    IR Dump

// TIME:      pass cse: {{[0-9.]+}} s
// TIME-NEXT: pass dce: {{[0-9.]+}} s
func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  func.return %2 : i32
}
