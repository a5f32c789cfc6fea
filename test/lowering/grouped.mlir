// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=32 tiling="{\"gconv2d_0\": {\"rows\": 2, \"n_blocks\": 2, \"m_blocks\": 4}, \"gconv2d_1\": {\"rows\": 4, \"n1\": 1, \"m_blocks\": 2}}"}' | filecheck %s --check-prefix=PIN
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"gconv2d_0\": {\"n_blocks\": 3}}"}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"gconv2d_1\": {\"n1\": 2}}"}' 2>&1 | filecheck %s --check-prefix=ERR-N1

// Grouped Conv, 32 channels in 8 groups of 4 (grouped.py): 2 super-groups of 4 groups, each one
// input C1 block to one output C1 block, so K = 1 block x 3x3 x 16 = 144 (not 2 blocks: 288) and
// N = 16 per mmad; the second super-group is one plane further on (block / loop offsets).
// Groups of 24 channels (48 in 2 groups) would pair blocks sharing no group (grouped_runs.py): runs
// of output blocks over the input blocks their groups read: block 0 (group 0) reads input blocks
// 0-1 (K = 2 x 3x3 x 16 = 288), block 1 (channels 16-31, groups 0 and 1) blocks 0-2 (K = 432),
// block 2 (group 1) blocks 1-2, each run's weights and bias at their own offsets, N = 16.
// Must-not: no dense block-diagonal conv2d (K = 432, N = 48), no channel gathers.
// A ReduceMean over H and W is a GlobalAveragePool kernel, not a transpose and a reduction.

// CHECK:      func.func @gconv2d_0({{.*}}tile.tiling = {block_dim = 1 : i64, k = {{[0-9]+}} : i64, m = {{[0-9]+}} : i64, m_blocks = 1 : i64, n_blocks = 1 : i64, rows = 8 : i64}
// CHECK:        tile.loop_begin {count = 2 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 1024}
// CHECK:        tile.copy %0, %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 1024,
// CHECK:        tile.img2col {{.*}}fm_c1 = 1, fm_h = 8, fm_w = 8, pad_t = 1, pad_b = 1, pad_l = 1, pad_r = 1,
// CHECK-NEXT:   tile.mmad {{.*}}m = 64, k = 144, n = 16, init = 1}
// CHECK:        tile.copy_l0c_to_ub {{.*}}n1 = 1, m = 64, src_m = 64}
// CHECK:        tile.loop_end
// CHECK-NOT:  func.func @conv2d
// CHECK:      func.func @gconv2d_1(
// CHECK:        tile.copy %0, %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 2, burst = 1024,
// CHECK-NEXT:   tile.copy %1, %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 4608,
// CHECK:        tile.img2col {{.*}}fm_c1 = 2,
// CHECK-NEXT:   tile.mmad {{.*}}m = 64, k = 288, n = 16, init = 1}
// CHECK:        tile.copy %0, %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 3, burst = 1024,
// CHECK-NEXT:   tile.copy %1, %{{[0-9]+}} {src_offset = 4608, dst_offset = 0, nburst = 1, burst = 6912,
// CHECK:        tile.img2col {{.*}}fm_c1 = 3,
// CHECK-NEXT:   tile.mmad {{.*}}m = 64, k = 432, n = 16, init = 1}
// CHECK:        tile.copy %2, %{{[0-9]+}} {src_offset = 128,
// CHECK:        tile.copy %{{[0-9]+}}, %3 {src_offset = 0, dst_offset = 1024, nburst = 1, burst = 1024,
// CHECK:        tile.copy %0, %{{[0-9]+}} {src_offset = 1024, dst_offset = 0, nburst = 2, burst = 1024,
// CHECK-NEXT:   tile.copy %1, %{{[0-9]+}} {src_offset = 11520,
// CHECK:        tile.mmad {{.*}}m = 64, k = 288, n = 16, init = 1}
// CHECK-NOT:  func.func @conv2d
// CHECK-NOT:  group_pad
// CHECK:      func.func @global_avg_pool_0(
// CHECK-NOT:  func.func @reduce

// PIN:        func.func @gconv2d_0({{.*}}tile.block_dim = 8 : i64, tile.tiling = {block_dim = 8 : i64, {{.*}}m_blocks = 4 : i64, n_blocks = 2 : i64, rows = 2 : i64}

// PIN:        func.func @gconv2d_1({{.*}}tile.block_dim = 2 : i64, tile.tiling = {block_dim = 2 : i64, {{.*}}m_blocks = 2 : i64, n1 = 1 : i64, n_blocks = 1 : i64, rows = 4 : i64}

// ERR-N1:     error: grouped Conv: tiling n1 = 2: 1 to 1 output blocks

// ERR:        error: grouped Conv: tiling n_blocks = 3: 1 to 2 (the planes, at most the cores)

builtin.module {
  func.func @main(%x: tensor<1x32x8x8xf32> {graph.name = "x"}, %x2: tensor<1x48x8x8xf32> {graph.name = "x2"}) -> (tensor<1x32x8x8xf32> {graph.name = "y0"}, tensor<1x48x8x8xf32> {graph.name = "y1"}, tensor<1x32x1x1xf32> {graph.name = "y2"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<32x4x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<32xf32>
    %w2 = graph.constant dense<2.500000e-01> : tensor<48x24x3x3xf32>
    %b2 = graph.constant dense<1.000000e-01> : tensor<48xf32>
    %y0 = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 8 : i64} : (tensor<1x32x8x8xf32>, tensor<32x4x3x3xf32>, tensor<32xf32>) -> tensor<1x32x8x8xf32>
    %y1 = graph.conv2d %x2, %w2, %b2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<1x48x8x8xf32>, tensor<48x24x3x3xf32>, tensor<48xf32>) -> tensor<1x48x8x8xf32>
    %y2 = graph.reduce %x {kind = "mean", axes = array<i64: 2, 3>, keepdims = 1 : i64} : tensor<1x32x8x8xf32> -> tensor<1x32x1x1xf32>
    func.return %y0, %y1, %y2 : tensor<1x32x8x8xf32>, tensor<1x48x8x8xf32>, tensor<1x32x1x1xf32>
  }
}
