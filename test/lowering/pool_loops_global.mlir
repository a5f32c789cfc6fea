// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"global_avg_pool_0\": {\"loops\": 1}}"}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"global_avg_pool_0\": {\"loops\": 1, \"cols\": 4}}"}' | filecheck %s --check-prefix=COLS
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s --check-prefix=TREE

// The loop form (tiling loops = 1) of GlobalAveragePool over 4x6 planes: after the float32 copy,
// rows 1..3 of the plane are added into row 0 by one hardware loop (the source row stepped), then a
// halving tree over the row's 6 positions (depth 3): the code depends on the row, not the map.
// CHECK:      func.func @global_avg_pool_0({{.*}}tile.tiling = {block_dim = 4 : i64, cols = 6 : i64, loops = 1 : i64, planes = 1 : i64, positions = 24 : i64}}
// CHECK:        op = "cast"
// CHECK-NEXT:   tile.loop_begin {count = 3 : i64}
// CHECK-NEXT:   tile.loop_step {field = "src1_offset", step = 96 : i64}
// CHECK-NEXT:   tile.vec %3, %3, %3 {dst_offset = 0, src0_offset = 0, src1_offset = 96, count = 6, unit = 16, {{.*}}op = "add"}
// CHECK-NEXT:   tile.loop_end
// CHECK-NEXT:   tile.vec %3, %3, %3 {{{.*}}src1_offset = 48, count = 3, unit = 16, {{.*}}op = "add"}
// CHECK-NEXT:   tile.vec %3, %3, %3 {{{.*}}src1_offset = 32, count = 1, unit = 16, {{.*}}op = "add"}
// CHECK-NEXT:   tile.vec %3, %3, %3 {{{.*}}src1_offset = 16, count = 1, unit = 16, {{.*}}op = "add"}
// CHECK-NEXT:   tile.vec %4, %3, %3 {{.*}}op = "mov"}

// cols pinned to 4 (a divisor of the 24 positions): 6 rows of 4, a loop of 5 and a tree of depth 2.
// COLS:       func.func @global_avg_pool_0({{.*}}cols = 4 : i64, loops = 1 : i64
// COLS:         tile.loop_begin {count = 5 : i64}
// COLS-NEXT:    tile.loop_step {field = "src1_offset", step = 64 : i64}
// COLS-NEXT:    tile.vec {{.*}}src1_offset = 64, count = 4, unit = 16, {{.*}}op = "add"}
// COLS-NEXT:    tile.loop_end
// COLS-NEXT:    tile.vec {{.*}}src1_offset = 32, count = 2, unit = 16, {{.*}}op = "add"}
// COLS-NEXT:    tile.vec {{.*}}src1_offset = 16, count = 1, unit = 16, {{.*}}op = "add"}
// COLS-NEXT:    tile.vec {{.*}}op = "mov"}

// Without the pin: a halving tree over the plane's 24 positions, no loop, no cols.
// TREE:       func.func @global_avg_pool_0({{.*}}tile.tiling = {block_dim = 4 : i64, planes = 1 : i64, positions = 24 : i64}}
// TREE-NOT:     tile.loop_begin
// TREE:         tile.vec {{.*}}src1_offset = 192, count = 12, unit = 16, {{.*}}op = "add"}
// TREE-NOT:     tile.loop_begin
// TREE:       func.func @trans_data_1

builtin.module {
  func.func @main(%0: tensor<1x64x4x6xf32> {graph.name = "x"}) -> (tensor<1x64x1x1xf32> {graph.name = "y"}) {
    %1 = graph.global_avg_pool %0 : tensor<1x64x4x6xf32> -> tensor<1x64x1x1xf32>
    func.return %1 : tensor<1x64x1x1xf32>
  }
}
