// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"max_pool_0\": {\"loops\": 1, \"rows\": 2, \"m_blocks\": 1}, \"trans_data_0\": {\"loops\": 1}}"}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"max_pool_0\": {\"rows\": 2, \"m_blocks\": 1}}"}' | filecheck %s --check-prefix=UNROLLED
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"trans_data_0\": {\"positions\": 20}}"}' 2>&1 | filecheck %s --check-prefix=ERR

// The loop form (tiling loops = 1, cann/lowering/vector.py pool, cann/lowering/transdata.py) of a
// 3x3 / 2 MaxPool with padding 1 on an 8x8 map: output tiles of 2 rows x 4 columns, the row tiles x
// the column tiles one nest of hardware loops (a loop of one iteration too) whose code does not
// depend on the map. The top rows and the left column of padding are filled by copies from a GM
// constant of the neutral value; in the other tiles the same copies write one position that the
// input copy then overwrites (clamped steps of their sizes). trans_data_0's rounds are one loop.
// CHECK:      func.func @trans_data_0({{.*}}tile.tiling = {block_dim = 1 : i64, blocks = 1 : i64, loops = 1 : i64, positions = 64 : i64}}
// CHECK:        tile.loop_begin {count = 1 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 64}
// CHECK-NEXT:   tile.loop_offset %1 {stride = 1024}
// CHECK-NEXT:   tile.copy %0, %2 {src_offset = 0, dst_offset = 0, nburst = 3, burst = 64,
// CHECK:        tile.loop_end
// CHECK:      func.func @max_pool_0(%0: memref<1024xf16, #tile<space gm>>, %1: memref<256xf16, #tile<space gm>>, %2: memref<144xf16, #tile<space gm>>) {{.*}}loops = 1 : i64, m_blocks = 1 : i64, rows = 2 : i64}}
// CHECK:        tile.loop_begin {count = 2 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 512}
// CHECK-NEXT:   tile.loop_offset %1 {stride = 128}
// CHECK-NEXT:   tile.loop_begin {count = 1 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 128}
// CHECK-NEXT:   tile.loop_offset %1 {stride = 64}
// the top fill: 144 elements (a row of 9 positions) in the first row tile, 16 elsewhere
// CHECK-NEXT:   tile.loop_step {field = "burst", step = -128 : i64, offset = 0 : i64, lo = -128 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.copy %2, %3 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 144, src_stride = 720, dst_stride = 720}
// the left fill: 5 rows of one position in the first column tile, one burst elsewhere
// CHECK-NEXT:   tile.loop_step {field = "nburst", step = -4 : i64, offset = 0 : i64, lo = -4 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.copy %2, %3 {src_offset = 0, dst_offset = 0, nburst = 5, burst = 16, src_stride = 0, dst_stride = 144}
// the input copy: clipped at the top (rows) and the left (columns) in the border tiles
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -128 : i64, offset = 0 : i64, lo = -128 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -16 : i64, offset = 0 : i64, lo = -16 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_offset", step = -144 : i64, offset = 0 : i64, lo = -144 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_offset", step = -16 : i64, offset = 0 : i64, lo = -16 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "nburst", step = 1 : i64, offset = 0 : i64, lo = 0 : i64, hi = 1 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "burst", step = 16 : i64, offset = 0 : i64, lo = 0 : i64, hi = 16 : i64}
// CHECK-NEXT:   tile.copy %0, %3 {src_offset = 0, dst_offset = 160, nburst = 4, burst = 128, src_stride = 128, dst_stride = 144}
// no vector op fills the padding: the output tile is initialised, the taps combine into it
// CHECK-NOT:    scalar = -65504.0, op = "dup"} : memref<768xf16
// CHECK:        tile.vec %4, %4, %4 {{.*}}count = 8, unit = 16, {{.*}}scalar = -65504.0, op = "dup"} : memref<128xf16
// CHECK:        tile.copy %4, %1 {src_offset = 0, dst_offset = 0, nburst = 2, burst = 64, src_stride = 64, dst_stride = 64}
// CHECK-NEXT:   tile.loop_end
// CHECK-NEXT:   tile.loop_end
// CHECK:      func.func @main
// CHECK:        tile.constant {format = "ND", value = dense<-6.550400e+04> : tensor<144xf16>}

// Without the pin (today's form): the border tile fills its input buffer by a vector dup, the
// tiles are code of their own (no clamped step), trans_data_0 is straight code.
// UNROLLED:      func.func @trans_data_0
// UNROLLED-NOT:    tile.loop_begin
// UNROLLED:      func.func @max_pool_0(%0: memref<1024xf16, #tile<space gm>>, %1: memref<256xf16, #tile<space gm>>) {{.*}}m_blocks = 1 : i64, rows = 2 : i64}}
// UNROLLED-NOT:    lo =
// UNROLLED:        scalar = -65504.0, op = "dup"} : memref<768xf16
// UNROLLED-NOT:    lo =
// UNROLLED:      func.func @main
// UNROLLED-NOT:    tile.constant

// ERR: error: trans_data: tiling positions = 20, blocks = 1: positions a positive multiple of 16, blocks 1 to 1

builtin.module {
  func.func @main(%0: tensor<1x3x8x8xf32> {graph.name = "x"}) -> (tensor<1x3x4x4xf32> {graph.name = "y"}) {
    %1 = graph.max_pool %0 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
    func.return %1 : tensor<1x3x4x4xf32>
  }
}
