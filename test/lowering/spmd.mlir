// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"gemm_0\": {\"vector\": 0, \"n_blocks\": 21, \"n\": 16, \"a_panel\": 1}}"}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{tiling="{\"gemm_0\": {\"vector\": 0, \"n_blocks\": 21, \"n\": 16, \"a_panel\": 1}}"},convert-tile-to-ascend' | filecheck %s --check-prefix=ASM
// RUN: cann-opt %s -p 'convert-graph-to-tile{tiling="{\"conv2d_0\": {\"m_blocks\": 2, \"rows\": 2}}"},convert-tile-to-ascend' | filecheck %s --check-prefix=ROWS

// SPMD: 64 output channels are 4 C0 blocks; the conv kernel spreads its 16-channel tiles over 4
// cores; each core moves its weight, bias and output pointers by block_idx * tile. 4 planes of
// the relu likewise. The 1 x 1000 Gemm output is 63 column blocks of 16, split 1 x 21 over the
// cores (pinned, with 16-column tiles reading the A panel; cann/lowering/gemm.py): 48 columns per
// core, the last core's block (40 columns) guarded on its own. The Gemm is pinned to the cube
// (vector = 0): by default its one row runs on the vector unit (cann/lowering/gemv.py, gemv.mlir).

// CHECK:      func.func @conv2d_0({{.*}}) attributes {tile.kernel, tile.block_dim = 4 : i64, tile.tiling = {block_dim = 4 : i64, k = 16 : i64, m = 16 : i64, n = 16 : i64
// CHECK:        tile.block_offset %1 {stride = 256}
// CHECK-NEXT:   tile.block_offset %2 {stride = 128}
// CHECK-NEXT:   tile.block_offset %3 {stride = 256}
// CHECK-NOT:    tile.block_if
// CHECK:      func.func @relu_0({{.*}}) attributes {tile.kernel, tile.block_dim = 4 : i64
// The Gemm: 21 blocks of 48 columns, each in three 16-column tiles reading the A panel (without
// multi-buffering, the pass default here, the whole L0A / L0B take K = 1024 in one cube step);
// the last block's 40 columns end in an 8-column burst.
// CHECK:      func.func @gemm_0({{.*}}) attributes {tile.kernel, tile.block_dim = 21 : i64, tile.tiling = {a_panel = 1 : i64, block_dim = 21 : i64, {{.*}}m_blocks = 1 : i64, n = 16 : i64, n_blocks = 21 : i64, sm = 16 : i64, sn = 48 : i64
// CHECK-NEXT:   tile.block_offset %1 {stride = 768}
// CHECK-NEXT:   tile.block_offset %2 {stride = 384}
// CHECK-NEXT:   tile.block_offset %3 {stride = 48}
// CHECK:        tile.block_if {lo = 0 : i64, hi = 20 : i64}
// CHECK:        tile.copy {{.*}}dst_offset = 32, nburst = 1, burst = 16, src_stride = 16, dst_stride = 1000}
// CHECK:        tile.block_endif
// CHECK:        tile.block_if {lo = 20 : i64, hi = 21 : i64}
// CHECK:        tile.copy {{.*}}dst_offset = 32, nburst = 1, burst = 8, src_stride = 16, dst_stride = 1000}
// CHECK:        tile.block_endif

// ASM:        ascend.kernel @conv2d_0 attributes {block_dim = 4 : i64, num_args = 4 : i64
// ASM-NEXT:     ascend.block_offset arg=1, stride=512
// ASM:        ascend.kernel @gemm_0 attributes {block_dim = 21 : i64
// ASM:          ascend.block_if lo=20, hi=21
// ASM:          ascend.block_endif

// Pinned m_blocks = 2: two groups of 4 cores; core b computes channel tile b % 4 (block_offset_mod)
// of its group's output rows (rows 0-1 on cores 0-3, rows 2-3 on cores 4-7, input row offset 2*4*16*2 B).
// ROWS:       ascend.kernel @conv2d_0 attributes {block_dim = 8 : i64, {{.*}}m_blocks = 2 : i64
// ROWS-NEXT:    ascend.block_offset_mod arg=1, stride=512, modulo=4
// ROWS-NEXT:    ascend.block_offset_mod arg=2, stride=256, modulo=4
// ROWS-NEXT:    ascend.block_offset_mod arg=3, stride=512, modulo=4
// ROWS-NEXT:    ascend.block_if lo=0, hi=4
// ROWS-NEXT:    ascend.copy_gm_to_l1 dst={{[0-9]+}}, src_arg=0, src=0, nburst=1, burst=256
// ROWS:         ascend.block_endif
// ROWS-NEXT:    ascend.block_if lo=4, hi=8
// ROWS-NEXT:    ascend.copy_gm_to_l1 dst={{[0-9]+}}, src_arg=0, src=256, nburst=1, burst=256
// ROWS:         ascend.block_endif
// ROWS-NEXT:  }

builtin.module {
  func.func @main(%x: tensor<1x1x4x4xf32> {graph.name = "x"}) -> (tensor<1x1000xf32> {graph.name = "y"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<64x1x1x1xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<64xf32>
    %c = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<64x1x1x1xf32>, tensor<64xf32>) -> tensor<1x64x4x4xf32>
    %r = graph.relu %c : tensor<1x64x4x4xf32>
    %f = graph.reshape %r : tensor<1x64x4x4xf32> -> tensor<1x1024xf32>
    %fw = graph.constant dense<1.000000e-02> : tensor<1024x1000xf32>
    %y = graph.gemm %f, %fw {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, trans_a = 0 : i64, trans_b = 0 : i64} : (tensor<1x1024xf32>, tensor<1024x1000xf32>) -> tensor<1x1000xf32>
    func.return %y : tensor<1x1000xf32>
  }
}
