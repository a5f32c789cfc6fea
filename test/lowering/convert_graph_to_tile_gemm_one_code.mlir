// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 2, \"n_blocks\": 3, \"m\": 32, \"n\": 32}}"},convert-tile-to-ascend' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 2, \"n_blocks\": 1, \"m\": 32}}"},convert-tile-to-ascend' | filecheck %s --check-prefix=COLUMN

// A grid of whole blocks (M = 64 in 2 block rows of 32, N = 96 in 3 block columns of 32) runs one
// code on the 6 cores: block b's A rows and output rows move by its block row b // 3
// (block_offset_div), its B columns and output columns by b % 3 (block_offset_mod); no block_if.
// (A ragged grid keeps a code per block row: the GRID run of convert_graph_to_tile_gemm.mlir.)
// CHECK:       ascend.kernel @matmul_0 attributes {block_dim = 6 : i64
// CHECK-NEXT:    ascend.block_offset_mod arg=1, stride=1024, modulo=3
// CHECK-NEXT:    ascend.block_offset_mod arg=2, stride=512, modulo=3
// CHECK-NEXT:    ascend.block_offset_mod arg=3, stride=64, modulo=3
// CHECK-NEXT:    ascend.block_offset_div arg=0, stride=19200, divisor=3
// CHECK-NEXT:    ascend.block_offset_div arg=3, stride=6144, divisor=3
// CHECK-NOT:     ascend.block_if
// CHECK:         ascend.copy_gm_to_l1_nd2nz dtype=0, dst={{[0-9]+}}, src_arg=0, src=0, rows=32, cols=300, src_row_stride=600
// CHECK-NOT:     ascend.block_if
// CHECK:         ascend.copy_ub_to_gm dst_arg=3, dst=0, src={{[0-9]+}}, nburst=32, burst=64, src_stride=64, dst_stride=192
// CHECK-NOT:     ascend.block_if

// One block column (n_blocks = 1): block b's rows move by b (block_offset), no divisor needed.
// COLUMN:       ascend.kernel @matmul_0 attributes {block_dim = 2 : i64
// COLUMN-NOT:     ascend.block_offset_div
// COLUMN:         ascend.block_offset arg=0, stride=19200
// COLUMN-NEXT:    ascend.block_offset arg=3, stride=6144
// COLUMN-NOT:     ascend.block_if

builtin.module {
  func.func @main(%a: tensor<64x300xf32> {graph.name = "a"}) -> (tensor<64x96xf32> {graph.name = "y"}) {
    %w = graph.constant dense<1.000000e-02> : tensor<300x96xf32>
    %y = graph.matmul %a, %w : (tensor<64x300xf32>, tensor<300x96xf32>) -> tensor<64x96xf32>
    func.return %y : tensor<64x96xf32>
  }
}
