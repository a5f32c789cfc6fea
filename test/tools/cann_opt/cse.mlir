// xDSL's own passes are available and compose.
// RUN: cann-opt %s -p cse,dce,canonicalize | filecheck %s

// CHECK-LABEL: func.func @f
// CHECK-NEXT:    %0 = arith.addi %a, %a : i32
// CHECK-NEXT:    %1 = arith.muli %0, %0 : i32
// CHECK-NEXT:    func.return %1 : i32
func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  func.return %2 : i32
}
