// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"conv2d_0\": {\"cols\": 5, \"c1\": 1}, \"conv2d_1\": {\"taps\": 1, \"rows\": 3}, \"conv2d_3\": {\"rows\": 2}}"}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=AUTO
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"conv2d_0\": {\"k\": 40000}}"}' 2>&1 | filecheck %s --check-prefix=ERR

// Conv tiling along every axis (conv_plan.py conv_plan). Pinned: conv2d_0 splits each output row
// into column chunks of 5 and the 3 input C1 blocks into 3 L1 loads, accumulating in L0C (mmad
// init = 1, then init = 0); conv2d_1 runs one 1x1 sub-convolution per kernel tap (weights in
// (kh, kw, c1, c0) order), 3 output rows per tile; conv2d_3's first rows read only padding (pads
// 6 > the 3x3 extent): those tiles skip img2col / mmad and write the bias (a vdup of zeros).
// Automatic: conv2d_2 is a dilation-12 3x3 on an 8x8 map: its off-centre taps only ever read
// padding, so it runs as a 1x1 (kernel 1x1, no taps split).

// CHECK:      func.func @conv2d_0({{.*}}tile.tiling = {block_dim = 1 : i64, c1 = 1 : i64, cols = 5 : i64, k = {{[0-9]+}} : i64, m = {{[0-9]+}} : i64, n = 16 : i64, rows = 1 : i64}}
// rows 0..3 (their top windows clamped to the map), of chunks 0..3
// CHECK:        tile.loop_begin {count = 4 : i64}
// CHECK-NEXT:   tile.loop_offset %3 {stride = 336}
// CHECK-NEXT:   tile.loop_begin {count = 4 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 80}
// CHECK-NEXT:   tile.loop_offset %3 {stride = 80}
// CHECK-NEXT:   tile.loop_step {field = "src_offset", step = -32 : i64, offset = 0 : i64, lo = -32 : i64, hi = 0 : i64}
// CHECK-NEXT:   tile.loop_step {field = "burst", step = 32 : i64, offset = 0 : i64, lo = 0 : i64, hi = 32 : i64}
// CHECK:        tile.copy %0, %[[FM:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 3, burst = 112, src_stride = 336, dst_stride = 112}
// CHECK:        tile.img2col %[[FM]], %{{.*}}fm_c1 = 1, fm_h = 3, fm_w = 7, pad_t = 2, pad_b = 0, pad_l = 2, pad_r = 0, {{.*}}kernel_h = 3, kernel_w = 3, dil_h = 2, dil_w = 2
// CHECK-NEXT:   tile.mmad {{.*}}m = 16, k = 144, n = 16, init = 1}
// CHECK:        tile.copy %0, %[[FM]] {src_offset = 3024,
// CHECK:        tile.mmad {{.*}}init = 0}
// CHECK:        tile.copy %0, %[[FM]] {src_offset = 6048,
// CHECK:        tile.mmad {{.*}}init = 0}
// CHECK-NEXT:   tile.copy
// CHECK-NEXT:   tile.copy_l0c_to_ub {{.*}}n1 = 1, m = 5, src_m = 16}
// CHECK:        tile.copy %{{.*}}, %3 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 80,
// the chunks of a row are one loop (conv_tiles.py emit_tiles): the first chunk's code, loop_clamps giving
// chunks 1.. their window: columns 5..9 read input columns 3..11 (src_offset 80 - 32 = 48, a
// 9-column burst, fm_w 7 + 2 = 9, pad_l 2 - 2 = 0)
// CHECK:        tile.loop_end
// the ragged last chunk (column 20 of 21: input columns 18..20 and 2 of padding) is peeled
// CHECK:        tile.img2col %[[FM]], {{.*}}fm_w = 3, pad_t = 2, pad_b = 0, pad_l = 0, pad_r = 2
// CHECK:      func.func @conv2d_1({{.*}}tile.tiling = {block_dim = 1 : i64, k = {{[0-9]+}} : i64, m = {{[0-9]+}} : i64, n = 16 : i64, rows = 3 : i64, taps = 1 : i64}}
// tap (0, 0) of output rows 0..2 (stride 2) reads input rows -2, 0, 2 and columns -2, 0, .., 18;
// tap (0, 1)'s weights are the next 48 K rows (3 fractal rows of 256 further on)
// CHECK:        tile.copy %1, %{{[0-9]+}} {src_offset = 0,
// CHECK:        tile.img2col {{.*}}fm_c1 = 3, fm_h = 3, fm_w = 19, pad_t = 2, pad_b = 0, pad_l = 2, pad_r = 0, stride_h = 2, stride_w = 2, kernel_h = 1, kernel_w = 1
// CHECK-NEXT:   tile.mmad {{.*}}k = 48, n = 16, init = 1}
// CHECK-NEXT:   tile.copy %0, %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 3, burst = 1008,
// CHECK-NEXT:   tile.copy %1, %{{[0-9]+}} {src_offset = 768,
// CHECK:        tile.img2col {{.*}}fm_c1 = 3, fm_h = 3, fm_w = 21, pad_t = 2, pad_b = 0, pad_l = 0, pad_r = 0, stride_h = 2, stride_w = 2, kernel_h = 1, kernel_w = 1
// CHECK-NEXT:   tile.mmad {{.*}}init = 0}
// CHECK:      func.func @conv2d_2({{.*}}tile.tiling = {block_dim = 1 : i64, k = {{[0-9]+}} : i64, m = {{[0-9]+}} : i64, n = 16 : i64, rows = 8 : i64}}
// CHECK:        tile.img2col {{.*}}fm_c1 = 2, fm_h = 8, fm_w = 8, pad_t = 0, pad_b = 0, pad_l = 0, pad_r = 0, {{.*}}kernel_h = 1, kernel_w = 1
// CHECK:        tile.mmad {{.*}}k = 32, n = 16, init = 1}
// CHECK:      func.func @conv2d_3(
// CHECK-NOT:    tile.img2col
// CHECK:        tile.vec %[[UB:[0-9]+]], {{.*}}count = 992, {{.*}}op = "dup"}
// CHECK-NEXT:   tile.vec %[[UB]], %[[UB]], {{.*}}op = "add"}
// CHECK:        tile.img2col

// AUTO:       func.func @conv2d_0({{.*}}tile.tiling = {block_dim = 1 : i64, k = {{[0-9]+}} : i64, m = {{[0-9]+}} : i64, n = 16 : i64, rows = 9 : i64}}
// AUTO-NOT:   {{(c1|cols|taps) = [0-9]+ : i64}}
// AUTO:       func.func @conv2d_2({{.*}}rows = 8 : i64}}
// AUTO:         tile.img2col {{.*}}kernel_h = 1, kernel_w = 1
// AUTO-NEXT:    tile.mmad {{.*}}k = 32, n = 16, init = 1}

// ERR:        error: Conv: tiling n = 16, k = 40000 leaves no room for the feature map (L0C 4096 positions, L1 0 bytes)

builtin.module {
  func.func @main(%x: tensor<1x48x9x21xf32> {graph.name = "x"}, %x2: tensor<1x32x8x8xf32> {graph.name = "x2"}) -> (tensor<1x16x9x21xf32> {graph.name = "y0"}, tensor<1x16x5x11xf32> {graph.name = "y1"}, tensor<1x16x8x8xf32> {graph.name = "y2"}, tensor<1x16x19x31xf32> {graph.name = "y3"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<16x48x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %w2 = graph.constant dense<2.500000e-01> : tensor<16x32x3x3xf32>
    %y0 = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>, group = 1 : i64} : (tensor<1x48x9x21xf32>, tensor<16x48x3x3xf32>, tensor<16xf32>) -> tensor<1x16x9x21xf32>
    %y1 = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>, group = 1 : i64} : (tensor<1x48x9x21xf32>, tensor<16x48x3x3xf32>, tensor<16xf32>) -> tensor<1x16x5x11xf32>
    %y2 = graph.conv2d %x2, %w2, %b {strides = array<i64: 1, 1>, pads = array<i64: 12, 12, 12, 12>, dilations = array<i64: 12, 12>, group = 1 : i64} : (tensor<1x32x8x8xf32>, tensor<16x32x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
    %y3 = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 6, 6, 6, 6>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x48x9x21xf32>, tensor<16x48x3x3xf32>, tensor<16xf32>) -> tensor<1x16x19x31xf32>
    func.return %y0, %y1, %y2, %y3 : tensor<1x16x9x21xf32>, tensor<1x16x5x11xf32>, tensor<1x16x8x8xf32>, tensor<1x16x19x31xf32>
  }
}
