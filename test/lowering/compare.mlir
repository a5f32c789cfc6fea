// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype},convert-tile-to-ascend' | filecheck %s --check-prefix=ASM

// Integer / bool computation (cann/lowering/compare.py): an int64 Less writes one 0/1 byte per
// element (bool is i1 in GM and UB), Not is a bitwise xor with 0x0101 on int16 lanes over the bool
// bytes, a float32 -> int32 Cast truncates toward zero.

// CHECK:      func.func @compare_0(%{{.*}}: memref<16xi64, #tile<space gm>>, %{{.*}}: memref<16xi64, #tile<space gm>>, %{{.*}}: memref<16xi1, #tile<space gm>>)
// CHECK:        tile.vec {{.*}}op = "cmp_lt"} : memref<256xi1, #tile<space ub>>, memref<256xi64, #tile<space ub>>, memref<256xi64, #tile<space ub>>
// CHECK:      func.func @not_0
// CHECK:        tile.vec {{.*}}scalar = 257.0, op = "dup"} : memref<256xi16, #tile<space ub>>
// CHECK:        tile.vec {{.*}}op = "xor"} : memref<256xi1, #tile<space ub>>, memref<256xi1, #tile<space ub>>, memref<256xi16, #tile<space ub>>
// CHECK:      func.func @cast_0
// CHECK:        tile.vec {{.*}}op = "cast_trunc"} : memref<256xi32, #tile<space ub>>, memref<256xf32, #tile<space ub>>
// CHECK:      func.func @main({{.*}}) -> (memref<2x8xi1, #tile<space gm>> {graph.name = "y"}, memref<2x8xi32, #tile<space gm>> {graph.name = "z"})

// int64 lanes: 32 per 256-byte repeat, the 0/1 bytes one 32-byte block per repeat; mode 2 = lt.
// ASM:        ascend.kernel @compare_0
// ASM:          ascend.vcmpv dtype=5, mode=2, {{.*}}repeat=1, mask=16, dst_rep=1, src0_rep=8, src1_rep=8
// 16 bool bytes = 8 int16 lanes (dtype 3).
// ASM:        ascend.kernel @not_0
// ASM:          ascend.vdup dtype=3, {{.*}}scalar=2.570000e+02
// ASM:          ascend.vxor dtype=3, {{.*}}repeat=1, mask=8,
// float32 (1) -> int32 (2), round 4 = trunc.
// ASM:        ascend.kernel @cast_0
// ASM:          ascend.vconv src_dtype=1, dst_dtype=2, round=4, {{.*}}mask=16

builtin.module {
  func.func @main(%0: tensor<2x8xi64> {graph.name = "a"}, %1: tensor<2x8xi64> {graph.name = "b"}, %2: tensor<2x8xf32> {graph.name = "x"}) -> (tensor<2x8xi1> {graph.name = "y"}, tensor<2x8xi32> {graph.name = "z"}) {
    %3 = graph.compare %0, %1 {kind = "lt"} : (tensor<2x8xi64>, tensor<2x8xi64>) -> tensor<2x8xi1>
    %4 = graph.not %3 : tensor<2x8xi1> -> tensor<2x8xi1>
    %5 = graph.cast %2 : tensor<2x8xf32> -> tensor<2x8xi32>
    func.return %4, %5 : tensor<2x8xi1>, tensor<2x8xi32>
  }
}
