// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 4}}"}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 16}}"}' | filecheck %s --check-prefix=TWO

// Loop rolling (cann/lowering/rolling.py): a 3x3 pad-1 Conv over 32 rows in tiles of 4 output rows.
// The first tile reads the top padding and the last the bottom one (5 input rows, pad_t / pad_b = 1);
// the 6 inner tiles are the same code moved 4 rows (4*32*16 = 2048 elements) through the input and
// the output: one hardware loop, the input and output pointers moved per iteration.
// CHECK:      func.func @conv2d_0(%[[X:[0-9]+]]: memref<16384xf16, #tile<space gm>>, %{{.*}}, %{{.*}}, %[[Y:[0-9]+]]: memref<16384xf16, #tile<space gm>>)
// CHECK:        tile.copy %[[X]], %[[FM:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2560,
// CHECK:        tile.img2col %[[FM]], {{.*}}fm_h = 5, fm_w = 32, pad_t = 1, pad_b = 0,
// CHECK:        tile.copy %{{[0-9]+}}, %[[Y]] {src_offset = 0, dst_offset = 0,
// CHECK-NEXT:   tile.loop_begin {count = 6 : i64}
// CHECK-NEXT:   tile.loop_offset %[[X]] {stride = 2048}
// CHECK-NEXT:   tile.loop_offset %[[Y]] {stride = 2048}
// CHECK-NEXT:   tile.copy %[[X]], %[[FM]] {src_offset = 1536, dst_offset = 0, nburst = 1, burst = 3072,
// CHECK:        tile.img2col %[[FM]], {{.*}}fm_h = 6, fm_w = 32, pad_t = 0, pad_b = 0,
// CHECK:        tile.copy %{{[0-9]+}}, %[[Y]] {src_offset = 0, dst_offset = 2048,
// CHECK-NEXT:   tile.loop_end
// CHECK-NEXT:   tile.copy %[[X]], %[[FM]] {src_offset = 13824, dst_offset = 0, nburst = 1, burst = 2560,
// CHECK:        tile.img2col %[[FM]], {{.*}}fm_h = 5, fm_w = 32, pad_t = 0, pad_b = 1,
// CHECK:        tile.copy %{{[0-9]+}}, %[[Y]] {src_offset = 0, dst_offset = 14336,
// CHECK-NEXT:   func.return

// Must not roll: two tiles of 16 rows, one with each border, differ in their padding. Each tile's
// 16 x 32 = 512 output positions are 4 M subtiles of 128: their img2col + mmad are one hardware loop
// stepping img2col's m_start (128 positions) and the L0C offset (128 x 16 fp32 elements), the
// epilogue per subtile another one stepping the L0C offset and moving the output pointer.
// TWO:        func.func @conv2d_0(%{{[0-9]+}}: {{.*}}, %[[Y:[0-9]+]]: memref<16384xf16, #tile<space gm>>)
// TWO:          tile.loop_begin {count = 4 : i64}
// TWO-NEXT:     tile.loop_step {field = "m_start", step = 128 : i64}
// TWO-NEXT:     tile.img2col {{.*}}pad_t = 1, pad_b = 0, {{.*}}m_start = 0, m_count = 128,
// TWO-NEXT:     tile.loop_step {field = "c_offset", step = 2048 : i64}
// TWO-NEXT:     tile.mmad {{.*}}c_offset = 0, m = 128,
// TWO-NEXT:     tile.loop_end
// TWO:          tile.loop_begin {count = 4 : i64}
// TWO-NEXT:     tile.loop_offset %[[Y]] {stride = 2048}
// TWO-NEXT:     tile.loop_step {field = "src_offset", step = 2048 : i64}
// TWO-NEXT:     tile.copy_l0c_to_ub {{.*}}src_offset = 0, dst_offset = 0, n1 = 1, m = 128, src_m = 128}
// TWO:          tile.loop_end
// TWO-NOT:      tile.loop_begin {count = 2
// TWO:          tile.img2col {{.*}}pad_t = 0, pad_b = 1,
// TWO-NOT:      tile.loop_begin {count = 2
// TWO:        func.func @trans_data_1

builtin.module {
  func.func @main(%x: tensor<1x16x32x32xf32> {graph.name = "x"}) -> (tensor<1x16x32x32xf32> {graph.name = "y"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<16x16x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %y = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x32x32xf32>
    func.return %y : tensor<1x16x32x32xf32>
  }
}
