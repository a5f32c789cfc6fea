// User mistakes: one line `error: <where>: <message>` on stderr, non-zero exit (exactly 2 is
// checked in test_cann_opt.py), no traceback.
// RUN: not cann-opt %s -p cse,no-such-pass 2>&1 | filecheck %s --check-prefixes=PASS,NOTB
// RUN: not cann-opt %s -p 'cse{bogus=1}' 2>&1 | filecheck %s --check-prefixes=OPT,NOTB
// RUN: not cann-opt %s 2>&1 | filecheck %s --check-prefixes=VERIFY,NOTB
// RUN: cann-opt %s --verify-diagnostics | filecheck %s --check-prefix=DIAG

// PASS:   error: no-such-pass: unknown pass
// OPT:    error: cse: bad pass option bogus: no such option (it takes no options)
// VERIFY: error: {{.*}}errors.mlir: 'arith.addi' op result 'result' at position 0 does not verify: attribute i32 expected from variable 'T', but got i64
// NOTB-NOT: {{Traceback|internal error}}
// DIAG:   result 'result' at position 0 does not verify:
// DIAG:   Operation does not verify
func.func @f(%a: i32) -> i32 {
  %0 = "arith.addi"(%a, %a) : (i32, i32) -> i64
  func.return %a : i32
}
