// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=32 tiling="{\"dwconv2d_0\": {\"rows\": 2, \"n_blocks\": 1, \"m_blocks\": 4}}"}' | filecheck %s --check-prefix=PIN
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 tiling="{\"dwconv2d_0\": {\"rows\": 3, \"first_rows\": 1, \"last_rows\": 1}}"}' | filecheck %s --check-prefix=RAMP
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1}' | filecheck %s --check-prefix=FUSED
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1},convert-tile-to-ascend' | filecheck %s --check-prefix=ASC16
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 precision_mode=must_keep_origin_dtype},convert-tile-to-ascend' | filecheck %s --check-prefix=ASC32
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"dwconv2d_0\": {\"n_blocks\": 3}}"}' 2>&1 | filecheck %s --check-prefix=ERR

// Depthwise Conv (group = C = 16, weight [16, 1, 3, 3]) on the vector unit (depthwise.py): one
// C1 plane; on one core the pipeline estimate (depthwise_bands.py) takes all 8 rows in one band
// (no loads or stores to overlap with). The band's input rows (+ halo + 1) land in UB rows of
// pitch Wp = 10 (8 columns and a zero column each side: 160 elements), padding rows and columns
// written with zeros after the load; the taps are one vmul then eight vmla over the band's
// positions in whole repeats (8 rows x 10 = 80, 8 positions of 16 channels per fp16 repeat), src0
// moved by the tap's (row, column) offset, src1 the tap's 16 weights broadcast (row `tap` of the
// per-plane table, one 32 B block per row, loaded in one DMA with the bias row 9); then the bias,
// and the 8 valid columns of each row stored. No img2col, no mmad.
// Ramp: pinned bands of 3 rows with a first and a last band of 1 row: bands 0, 1-3, 4-6, 7. A band
// loads the input rows its stored outputs read (rows + 2); the few elements past them that its
// unstored columns and whole repeats read are zeroed (band 0: 8 columns of row 3, band 1-3: 4).
// Fused: a fused ReLU6 (Clip 0..6) is two scalar ops on the band, vmaxs 0 then vmins 6.
// Must-not: a grouped Conv with 2 channels per group is not depthwise: it stays on the cube (grouped.py).

// CHECK:      func.func @dwconv2d_0({{.*}}tile.tiling = {block_dim = 1 : i64, first_rows = 0 : i64, last_rows = 0 : i64, m_blocks = 1 : i64, n_blocks = 1 : i64, rows = 8 : i64}
// CHECK-NOT:    tile.img2col
// CHECK:        tile.copy %1, %[[W:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 160,
// CHECK-NEXT:   tile.copy %0, %[[IN:[0-9]+]] {src_offset = 0, dst_offset = 176, nburst = 8, burst = 128, src_stride = 128, dst_stride = 160}
// CHECK-NEXT:   tile.vec %[[IN]], {{.*}}dst_offset = 0, {{.*}}count = 160, unit = 1, {{.*}}op = "dup"
// CHECK-NEXT:   tile.vec %[[IN]], {{.*}}dst_offset = 1440, {{.*}}count = 320, unit = 1, {{.*}}op = "dup"
// CHECK-NEXT:   tile.vec %[[IN]], {{.*}}dst_offset = 160, {{.*}}count = 8, unit = 16, dst_stride = 160, {{.*}}op = "dup"
// CHECK-NEXT:   tile.vec %[[IN]], {{.*}}dst_offset = 304, {{.*}}count = 8, unit = 16, dst_stride = 160, {{.*}}op = "dup"
// CHECK-NEXT:   tile.vec %[[ACC:[0-9]+]], %[[IN]], %[[W]] {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 80, unit = 16, dst_stride = 16, src0_stride = 16, src1_stride = 0, scalar = 0.0, op = "mul"}
// CHECK-NEXT:   tile.vec %[[ACC]], %[[IN]], %[[W]] {dst_offset = 0, src0_offset = 16, src1_offset = 16, {{.*}}op = "mla"}
// CHECK-COUNT-6: tile.vec %[[ACC]], %[[IN]], %[[W]] {{.*}}op = "mla"}
// CHECK-NEXT:   tile.vec %[[ACC]], %[[IN]], %[[W]] {dst_offset = 0, src0_offset = 352, src1_offset = 128, count = 80, {{.*}}op = "mla"}
// CHECK-NEXT:   tile.vec %[[ACC]], %[[ACC]], %[[W]] {{{.*}}src1_offset = 144, {{.*}}src1_stride = 0, {{.*}}op = "add"}
// CHECK-NEXT:   tile.copy %[[ACC]], %2 {src_offset = 0, dst_offset = 0, nburst = 8, burst = 128, src_stride = 160, dst_stride = 128}
// CHECK-NOT:    tile.mmad
// CHECK:      func.func @gconv2d_0(
// CHECK:        tile.img2col
// CHECK:        tile.mmad

// PIN:        func.func @dwconv2d_0({{.*}}tile.block_dim = 4 : i64, tile.tiling = {block_dim = 4 : i64, first_rows = 0 : i64, last_rows = 0 : i64, m_blocks = 4 : i64, n_blocks = 1 : i64, rows = 2 : i64}
// PIN:          tile.block_if {lo = 0 : i64, hi = 1 : i64}
// PIN:          tile.block_if {lo = 3 : i64, hi = 4 : i64}

// RAMP:       func.func @dwconv2d_0({{.*}}tile.tiling = {block_dim = 1 : i64, first_rows = 1 : i64, last_rows = 1 : i64, m_blocks = 1 : i64, n_blocks = 1 : i64, rows = 3 : i64}
// RAMP:         tile.copy %0, %[[IN:[0-9]+]] {src_offset = 0, dst_offset = 176, nburst = 2,
// RAMP-NEXT:    tile.vec %[[IN]], {{.*}}dst_offset = 0, {{.*}}count = 160, unit = 1, {{.*}}op = "dup"
// RAMP-NEXT:    tile.vec %[[IN]], {{.*}}dst_offset = 480, {{.*}}count = 128, unit = 1, {{.*}}op = "dup"
// RAMP:         tile.copy %{{[0-9]+}}, %2 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 128,
// RAMP:         tile.copy %0, %[[IN]] {src_offset = 0, dst_offset = 16, nburst = 5,
// RAMP-NEXT:    tile.vec %[[IN]], {{.*}}dst_offset = 800, {{.*}}count = 64, unit = 1, {{.*}}op = "dup"
// RAMP:         tile.copy %{{[0-9]+}}, %2 {src_offset = 0, dst_offset = 128, nburst = 3, burst = 128,
// RAMP:         tile.copy %0, %[[IN]] {src_offset = 384, dst_offset = 16, nburst = 5,
// RAMP:         tile.copy %{{[0-9]+}}, %2 {src_offset = 0, dst_offset = 512, nburst = 3, burst = 128,
// RAMP:         tile.copy %0, %[[IN]] {src_offset = 768, dst_offset = 16, nburst = 2,
// RAMP:         tile.copy %{{[0-9]+}}, %2 {src_offset = 0, dst_offset = 896, nburst = 1, burst = 128,
// RAMP:       func.func @gconv2d_0(

// FUSED:      func.func @dwconv2d_1(
// FUSED:        op = "add"}
// FUSED-NEXT:   tile.vec {{.*}}scalar = 0.0, op = "maxs"}
// FUSED-NEXT:   tile.vec {{.*}}scalar = 6.0, op = "mins"}
// FUSED-NEXT:   tile.copy

// ASC16/ASC32 (convert_tile_to_ascend.py): fp16's 16 weights of a tap are one 32 B block, read by
// every block of the repeat (block stride 0); fp32's table row is a whole 256 B repeat (stride 1).
// ASC16:      ascend.vmla dtype=0, {{.*}}src0_blk=1, src1_blk=0, dst_rep=8, src0_rep=8, src1_rep=0,
// ASC32:      ascend.vmla dtype=1, {{.*}}src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=0,

// ERR:        error: depthwise Conv: tiling n_blocks = 3: 1 to 1 (the planes, at most the cores)

builtin.module {
  func.func @main(%x: tensor<1x16x8x8xf32> {graph.name = "x"}, %x2: tensor<1x16x8x8xf32> {graph.name = "x2"}) -> (tensor<1x16x8x8xf32> {graph.name = "y0"}, tensor<1x16x8x8xf32> {graph.name = "y1"}, tensor<1x16x8x8xf32> {graph.name = "y2"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<16x1x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %w2 = graph.constant dense<2.500000e-01> : tensor<16x2x3x3xf32>
    %y0 = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 16 : i64} : (tensor<1x16x8x8xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
    %y1 = graph.conv2d %x2, %w2, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 8 : i64} : (tensor<1x16x8x8xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
    %y2 = graph.fused "cube_epilogue" : tensor<1x16x8x8xf32> {
      %c = graph.conv2d %x2, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 16 : i64} : (tensor<1x16x8x8xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
      %r = graph.clip %c {min = 0.000000e+00 : f32, max = 6.000000e+00 : f32} : tensor<1x16x8x8xf32>
      graph.yield %r : tensor<1x16x8x8xf32>
    }
    func.return %y0, %y1, %y2 : tensor<1x16x8x8xf32>, tensor<1x16x8x8xf32>, tensor<1x16x8x8xf32>
  }
}
