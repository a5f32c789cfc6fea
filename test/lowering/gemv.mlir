// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16},convert-tile-to-ascend' | filecheck %s --check-prefix=ASM
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"nt\": 32, \"kc\": 1}}"}' | filecheck %s --check-prefix=PIN
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"vector\": 0}}"}' | filecheck %s --check-prefix=CUBE
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_1\": {\"vector\": 1}}"}' 2>&1 | filecheck %s --check-prefix=ERR16
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"nt\": 24}}"}' 2>&1 | filecheck %s --check-prefix=ERRNT
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"vector\": 2}}"}' 2>&1 | filecheck %s --check-prefix=ERRV

// Small-M MatMul on the vector unit (cann/lowering/gemv.py): 1 x 300 by a constant 300 x 90.
// K = 300 is 3 chunks of one fp16 repeat (128; the last zero-padded), N = 90 is 6 tiles of 16
// columns over 6 cores (the last tile's 10 columns on its own core: B stored compact there).
// A is loaded once (its K padding zeroed first); per tile: the partial sums zeroed, B's 3 chunks
// in loads of kc = 2 (one burst each), one vmla of 16 repeats per chunk (A's chunk broadcast:
// src1 stride 0), one vcadd (cadd) row sum per output, one store. No mmad: executed MACs are the
// vmla lanes, 90 x 384. Must-not: M = 16 (matmul_1) stays on the cube.

// CHECK:      func.func @matmul_0({{.*}}tile.block_dim = 6 : i64, tile.tiling = {block_dim = 6 : i64, kc = 2 : i64, nt = 16 : i64, vector = 1 : i64}}
// CHECK-NEXT:   tile.block_offset %1 {stride = 6144}
// CHECK-NEXT:   tile.block_offset %2 {stride = 16}
// CHECK:        tile.vec %[[A:[0-9]+]], {{.*}}count = 384, unit = 1, {{.*}}op = "dup"}
// CHECK-NEXT:   tile.copy %0, %[[A]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 300, src_stride = 300, dst_stride = 384}
// CHECK-NEXT:   tile.block_if {lo = 0 : i64, hi = 5 : i64}
// CHECK-NEXT:   tile.vec %[[ACC:[0-9]+]], {{.*}}count = 2048, unit = 1, {{.*}}op = "dup"}
// CHECK-NEXT:   tile.copy %1, %[[B:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 4096,
// CHECK-NEXT:   tile.vec %[[ACC]], %[[B]], %[[A]] {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 16, unit = 128, dst_stride = 128, src0_stride = 128, src1_stride = 0, scalar = 0.0, op = "mla"}
// CHECK-NEXT:   tile.vec %[[ACC]], %[[B]], %[[A]] {dst_offset = 0, src0_offset = 2048, src1_offset = 128, count = 16, {{.*}}op = "mla"}
// CHECK-NEXT:   tile.copy %1, %[[B]] {src_offset = 4096, dst_offset = 0, nburst = 1, burst = 2048,
// CHECK-NEXT:   tile.vec %[[ACC]], %[[B]], %[[A]] {dst_offset = 0, src0_offset = 0, src1_offset = 256, count = 16, {{.*}}op = "mla"}
// CHECK-NEXT:   tile.vec %[[Y:[0-9]+]], %[[ACC]], %[[ACC]] {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 16, unit = 128, dst_stride = 1, src0_stride = 128, {{.*}}op = "cadd"}
// CHECK-NEXT:   tile.copy %[[Y]], %2 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 16, src_stride = 16, dst_stride = 90}
// CHECK-NEXT:   tile.block_endif
// CHECK-NEXT:   tile.block_if {lo = 5 : i64, hi = 6 : i64}
// CHECK:        tile.copy %1, %[[B]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2560,
// CHECK:        tile.vec %[[Y]], %[[ACC]], %[[ACC]] {{.*}}count = 10, unit = 128, {{.*}}op = "cadd"}
// CHECK-NEXT:   tile.copy %[[Y]], %2 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 10, src_stride = 16, dst_stride = 90}
// CHECK-NOT:    tile.mmad
// CHECK:      func.func @matmul_1(
// CHECK-NOT:    op = "mla"
// CHECK:        tile.mmad

// ASM:        ascend.kernel @matmul_0
// ASM:          ascend.vmla dtype=0, dst=[[ACC:[0-9]+]], src0={{[0-9]+}}, src1=0, repeat=16, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=0,
// ASM:          ascend.vcadd dtype=0, dst={{[0-9]+}}, src0=[[ACC]], src1=[[ACC]], repeat=16, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8,
// ASM-NOT:      ascend.mmad
// ASM:        ascend.kernel @matmul_1

// Pinned: tiles of 32 columns (3 cores, the last 26 columns), one chunk per load (3 loads).
// PIN:        func.func @matmul_0({{.*}}tile.block_dim = 3 : i64, tile.tiling = {block_dim = 3 : i64, kc = 1 : i64, nt = 32 : i64, vector = 1 : i64}}
// PIN:          tile.copy %1, {{%[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 4096,
// PIN-NEXT:     tile.vec {{.*}}count = 32, unit = 128, {{.*}}op = "mla"}
// PIN-NEXT:     tile.copy %1, {{%[0-9]+}} {src_offset = 4096, dst_offset = 0, nburst = 1, burst = 4096,

// vector = 0 pins the cube.
// CUBE:       func.func @matmul_0({{.*}}tile.tiling = {a_panel
// CUBE-NOT:     op = "mla"
// CUBE:         tile.mmad

// ERR16:      error: Gemm: tiling vector = 1 needs M < 16 (M = 16): the cube runs it
// ERRNT:      error: Gemm (vector): tiling nt = 24 must be a multiple of 16
// ERRV:       error: Gemm: tiling vector = 2 must be 0 or 1

builtin.module {
  func.func @main(%a: tensor<1x300xf32> {graph.name = "a"}, %a16: tensor<16x300xf32> {graph.name = "a16"}) -> (tensor<1x90xf32> {graph.name = "y"}, tensor<16x90xf32> {graph.name = "y16"}) {
    %w = graph.constant dense<1.000000e-02> : tensor<300x90xf32>
    %y = graph.matmul %a, %w : (tensor<1x300xf32>, tensor<300x90xf32>) -> tensor<1x90xf32>
    %y16 = graph.matmul %a16, %w : (tensor<16x300xf32>, tensor<300x90xf32>) -> tensor<16x90xf32>
    func.return %y, %y16 : tensor<1x90xf32>, tensor<16x90xf32>
  }
}
