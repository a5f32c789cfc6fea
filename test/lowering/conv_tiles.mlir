// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 3, \"cols\": 6, \"loops\": 1}}"}' | filecheck %s
// RUN: cann-opt %S/Inputs/conv_tiles_c1.mlir -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"rows\": 3, \"cols\": 6, \"loops\": 1}}"}' | filecheck %s --check-prefix=C1

// The output tiles of a convolution as nested hardware loops (conv_tiles.py emit_tiles): pinned 3 x 6
// rectangles of a 10 x 14 map (3x3, pads 1) are a loop over 4 tile rows of a loop over 3 tile
// columns, one tile's code (KernelBuilder.tile_loops: the same nest for any counts, 1 included).
// With loops = 1 the ragged last row (rows 9..9) and column (12..13) tiles are moved back
// to end at the map's edge (rows 7..9, columns 8..13): every tile is whole (m = 18 positions). The
// border tiles join the loops through clamped steps at both edges of each loop: the feature-map
// load's window (src_offset, nburst of the row loop, burst and dst_stride of the column loop: a
// copy per C1 block, a burst per input row), img2col's height window (fm_h, pad_t, pad_b, up = 1)
// and width window (fm_w, pad_l, pad_r), the output copy's moved-back last tiles (dst_offset); a
// tile's 3 output rows are one copy (a burst of 6 positions per map row, 14 apart).

// CHECK:      func.func @conv2d_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 6 : i64, {{.*}}loops = 1 : i64, {{.*}}rows = 3 : i64}}
// CHECK-NOT:    tile.img2col
// CHECK:        tile.loop_begin {count = 4 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 672}
// CHECK-NEXT:   tile.loop_offset %3 {stride = 672}
// CHECK-NEXT:   tile.loop_begin {count = 3 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 96}
// CHECK-NEXT:   tile.loop_offset %3 {stride = 96}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -224 : i64, offset = 0 : i64, lo = -224 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -448 : i64, offset = 896 : i64, lo = -448 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -16 : i64, offset = 0 : i64, lo = -16 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -64 : i64, offset = 64 : i64, lo = -64 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "nburst", step = 1 : i64, offset = 0 : i64, lo = 0 : i64, hi = 1 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "nburst", step = -1 : i64, offset = 2 : i64, lo = -1 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "burst", step = 16 : i64, offset = 0 : i64, lo = 0 : i64, hi = 16 : i64}
// CHECK-NEXT:   tile.loop_step {field = "burst", step = -16 : i64, offset = 16 : i64, lo = -16 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_stride", step = 16 : i64, offset = 0 : i64, lo = 0 : i64, hi = 16 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_stride", step = -16 : i64, offset = 16 : i64, lo = -16 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.copy %0, %[[FM:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 4, burst = 112, src_stride = 224, dst_stride = 112}
// CHECK:        tile.loop_step {field = "fm_h", step = 1 : i64, offset = 0 : i64, lo = 0 : i64, hi = 1 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "fm_h", step = -1 : i64, offset = 2 : i64, lo = -1 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "pad_t", step = -1 : i64, offset = 0 : i64, lo = -1 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "pad_b", step = 1 : i64, offset = -2 : i64, lo = 0 : i64, hi = 1 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "fm_w", step = 1 : i64, offset = 0 : i64, lo = 0 : i64, hi = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "fm_w", step = -1 : i64, offset = 1 : i64, lo = -1 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "pad_l", step = -1 : i64, offset = 0 : i64, lo = -1 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "pad_r", step = 1 : i64, offset = -1 : i64, lo = 0 : i64, hi = 1 : i64}
// CHECK-NEXT:   tile.img2col %[[FM]], %{{.*}}fm_c1 = 1, fm_h = 4, fm_w = 7, pad_t = 1, pad_b = 0, pad_l = 1, pad_r = 0, {{.*}}fm_c1_stride = 640}
// CHECK-NEXT:   tile.mmad {{.*}}m = 32, k = 144, n = 16, init = 1}
// CHECK:        tile.copy_l0c_to_ub {{.*}}n1 = 1, m = 18, src_m = 32}
// CHECK:        tile.loop_step {field = "dst_offset", step = -448 : i64, offset = 896 : i64, lo = -448 : i64, hi = 0 : i64, up = 1 : i64}
// CHECK-NEXT:   tile.loop_step {field = "dst_offset", step = -64 : i64, offset = 64 : i64, lo = -64 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.copy %{{.*}}, %3 {src_offset = 0, dst_offset = 0, nburst = 3, burst = 96, src_stride = 96, dst_stride = 224}
// CHECK-NEXT:   tile.loop_end
// CHECK-NEXT:   tile.loop_end
// CHECK-NOT:    tile.img2col
// CHECK:        func.return

// Two C1 blocks (Inputs/conv_tiles_c1.mlir, 32 input channels): the same nest, the feature map a copy
// per C1 block, block 1 at the fixed pitch of the full 5 x 8 window (640 elements) in every tile,
// read by img2col at that pitch (fm_c1_stride): no step moves either (at a border tile the packed
// pitch, rows x columns of its clipped window, is a product of two clamps no loop_clamp gives).

// C1:           tile.loop_begin {count = 4 : i64}
// C1:           tile.loop_begin {count = 3 : i64}
// C1:           tile.copy %0, %[[FM:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 4, burst = 112, src_stride = 224, dst_stride = 112}
// C1-NOT:       field = "dst_offset"
// C1:           tile.copy %0, %[[FM]] {src_offset = 2240, dst_offset = 640, nburst = 4, burst = 112, src_stride = 224, dst_stride = 112}
// C1-NOT:       field = "fm_c1_stride"
// C1:           tile.img2col %[[FM]], %{{.*}}fm_c1 = 2, {{.*}}k_start = 0, k_count = 256, fm_c1_stride = 640}
// C1:           tile.img2col %[[FM]], %{{.*}}fm_c1 = 2, {{.*}}k_start = 256, k_count = 32, fm_c1_stride = 640}
// C1:           tile.loop_end
// C1-NEXT:      tile.loop_end
// C1-NOT:       tile.img2col
// C1:           func.return

builtin.module {
  func.func @main(%x: tensor<1x16x10x14xf32> {graph.name = "x"}) -> (tensor<1x16x10x14xf32> {graph.name = "y"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<16x16x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %y = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x16x10x14xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x10x14xf32>
    func.return %y : tensor<1x16x10x14xf32>
  }
}
