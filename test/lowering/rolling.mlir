// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 4}}"}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 16}}"}' | filecheck %s --check-prefix=TWO
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 5}}"}' | filecheck %s --check-prefix=PART

// Loop rolling (cann/lowering/rolling.py): a 3x3 pad-1 Conv over 32 rows in tiles of 4 output rows.
// The first tile reads the top padding and the last the bottom one (5 input rows, pad_t / pad_b = 1);
// the 8 tiles are one hardware loop: the code moves 4 rows (4*32*16 = 2048 elements) through the
// input and the output per iteration, and the border tiles' differences are clamped steps: the
// window starts a row later at the top (src_offset -512 from iteration 1 on: the first window starts
// at row 0, not at row -1), it has a row less at the top and at the bottom (burst, dst_stride,
// fm_h), and img2col's pad_t is 1 in the first iteration only, pad_b 1 in the last only.
// CHECK:      func.func @conv2d_0(%[[X:[0-9]+]]: memref<16384xf16, #tile<space gm>>, %{{.*}}, %{{.*}}, %[[Y:[0-9]+]]: memref<16384xf16, #tile<space gm>>)
// CHECK:        tile.loop_begin {count = 8 : i64}
// CHECK-NEXT:   tile.loop_offset %[[X]] {stride = 2048}
// CHECK-NEXT:   tile.loop_offset %[[Y]] {stride = 2048}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -512 : i64, offset = 0 : i64, lo = -512 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "burst", step = 512 : i64, offset = 0 : i64, lo = 0 : i64, hi = 512 : i64}
// CHECK-NEXT:   tile.loop_step {field = "burst", step = -512 : i64, offset = 3072 : i64, lo = -512 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_stride", step = 512 : i64, offset = 0 : i64, lo = 0 : i64, hi = 512 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_stride", step = -512 : i64, offset = 3072 : i64, lo = -512 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.copy %[[X]], %[[FM:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2560,
// CHECK:        tile.loop_step {field = "fm_h", step = 1 : i64, offset = 0 : i64, lo = 0 : i64, hi = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "fm_h", step = -1 : i64, offset = 6 : i64, lo = -1 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "pad_t", step = -1 : i64, offset = 0 : i64, lo = -1 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "pad_b", step = 1 : i64, offset = -6 : i64, lo = 0 : i64, hi = 1 : i64}
// CHECK-NEXT:   tile.img2col %[[FM]], {{.*}}fm_h = 5, fm_w = 32, pad_t = 1, pad_b = 0,
// CHECK:        tile.copy %{{[0-9]+}}, %[[Y]] {src_offset = 0, dst_offset = 0,
// CHECK-NEXT:   tile.loop_end
// CHECK-NEXT:   func.return

// Two tiles of 16 rows, one with each border: one loop of 2. Each tile's 16 x 32 = 512 output
// positions are 4 M subtiles of 128: their img2col + mmad are a nested hardware loop stepping
// img2col's m_start (128 positions) and the L0C offset (128 x 16 fp32 elements); the pads move with
// the outer loop (up = 1); the epilogue per subtile is another nested loop.
// TWO:        func.func @conv2d_0(%{{[0-9]+}}: {{.*}}, %[[Y:[0-9]+]]: memref<16384xf16, #tile<space gm>>)
// TWO:          tile.loop_begin {count = 2 : i64}
// TWO:          tile.loop_begin {count = 4 : i64}
// TWO-NEXT:     tile.loop_step {field = "m_start", step = 128 : i64}
// TWO-NEXT:     tile.loop_step {field = "pad_t", step = -1 : i64, offset = 0 : i64, lo = -1 : i64, hi = 0 : i64, up = 1 : i64}
// TWO-NEXT:     tile.loop_step {field = "pad_b", step = 1 : i64, offset = 0 : i64, lo = 0 : i64, hi = 1 : i64, up = 1 : i64}
// TWO-NEXT:     tile.img2col {{.*}}pad_t = 1, pad_b = 0, {{.*}}m_start = 0, m_count = 128,
// TWO-NEXT:     tile.loop_step {field = "c_offset", step = 2048 : i64}
// TWO-NEXT:     tile.mmad {{.*}}c_offset = 0, m = 128,
// TWO-NEXT:     tile.loop_end
// TWO:          tile.loop_begin {count = 4 : i64}
// TWO-NEXT:     tile.loop_offset %[[Y]] {stride = 2048}
// TWO-NEXT:     tile.loop_step {field = "src_offset", step = 2048 : i64}
// TWO-NEXT:     tile.copy_l0c_to_ub {{.*}}src_offset = 0, dst_offset = 0, n1 = 1, m = 128, src_m = 128}
// TWO:          tile.loop_end
// TWO-NEXT:     tile.loop_end

// Must not fold: in tiles of 5 rows the last tile has 2 (a partial tile: other M subtiles, not a
// clamped field); the first 6 tiles are one loop, the last one stays after it.
// PART:         tile.loop_begin {count = 6 : i64}
// PART:         tile.img2col {{.*}}fm_h = 6, fm_w = 32, pad_t = 1, pad_b = 0,
// PART:         tile.loop_end
// PART-NOT:     tile.loop_begin
// PART:         tile.img2col {{.*}}fm_h = 3, fm_w = 32, pad_t = 0, pad_b = 1,
// PART:         func.return
// TWO:        func.func @trans_data_1

builtin.module {
  func.func @main(%x: tensor<1x16x32x32xf32> {graph.name = "x"}) -> (tensor<1x16x32x32xf32> {graph.name = "y"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<16x16x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %y = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x32x32xf32>
    func.return %y : tensor<1x16x32x32xf32>
  }
}
