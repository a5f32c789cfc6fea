// cann-opt offers only what applies to cann's IR (issue 10, items 10 and 16): the mlir target
// (xDSL's llvm, riscv-asm, ... crash on cann's dialects) and the mlir frontend, which -f selects
// whatever the file's suffix is.
// RUN: not cann-opt %s -t llvm 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: cp %s %t.txt
// RUN: cann-opt -f mlir %t.txt -p cse | filecheck %s
// RUN: not cann-opt %t.txt 2>&1 | filecheck %s --check-prefix=SUFFIX

// TARGET:      error: cann-opt: argument -t/--target: invalid choice: 'llvm' (choose from mlir)
// CHECK:       %1 = arith.muli %0, %0 : i32
// SUFFIX:      error: {{.*}}.txt: Unrecognized file extension 'txt' (give -f mlir to parse it as MLIR text)
func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  func.return %2 : i32
}
