// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16},convert-tile-to-ascend' | filecheck %s --check-prefix=ASM
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"conv2d_0\": {\"c04\": 0}}"}' | filecheck %s --check-prefix=OFF

// Small-channel convolution (cann/lowering/small_cin.py): a 7x7 stride-2 Conv of a 3-channel graph
// input. The input is converted to NC1HWC0_C04 ([1][1][16][16][4] = 1024 halves) by the cube: the
// channel planes loaded by nd2nz as B = X^T (rows = channels, zero padded), each 16-position block
// times a 16x16 identity (fp32 mmad), L0C [256][16] to UB as fp16, one DMA of 4-element bursts.
// img2col_c04 packs (kh, kw, c4) into K = 7*7*4 = 196 -> 208 columns (13 fractals), where NC1HWC0
// takes 7*7*16 = 784. All 64 output channels are one tile whose weights stay in L0B for every
// output tile. A 9x9 map (81 positions, not whole fractals) is converted by element scatter (the
// padding lane zeroed by one burst, each channel scattered into its lane at a stride of 4).
// Must-not: the 16-channel Conv (conv2d_1) keeps NC1HWC0 and img2col; pinned c04 = 0 (OFF) the
// 3-channel Conv takes NC1HWC0 too.

// CHECK:      func.func @trans_data_0(%{{.*}}: memref<768xf32, #tile<space gm>>, %{{.*}}: memref<1024xf16, #tile<space gm>>, %{{.*}}: memref<256xf32, #tile<space gm>>)
// CHECK:        tile.load2d {{.*}}count = 2, src_stride = 128, dst_stride = 128} : memref<256xf32, #tile<space l1>>, memref<256xf32, #tile<space l0a>>
// CHECK-NEXT:   tile.copy_nd2nz {{.*}}rows = 3, cols = 256, src_row_stride = 256}
// CHECK-NEXT:   tile.load2d {{.*}}count = 32,
// CHECK-NEXT:   tile.mmad {{.*}}b_offset = 0, c_offset = 0, m = 16, k = 16, n = 16, init = 1}
// CHECK:        tile.mmad {{.*}}b_offset = 3840, c_offset = 3840, m = 16, k = 16, n = 16, init = 1}
// CHECK-NEXT:   tile.copy_l0c_to_ub {{.*}}n1 = 1, m = 256, src_m = 256}
// CHECK-NEXT:   tile.copy {{.*}}nburst = 256, burst = 4, src_stride = 16, dst_stride = 4}
// CHECK:      func.func @conv2d_0({{.*}}tile.tiling = {{{.*}}c04 = 1 : i64, k = 208 : i64, {{.*}}n = 64 : i64
// CHECK:        tile.copy %{{.*}}nburst = 13, burst = 1024,
// CHECK-NEXT:   tile.load2d {{.*}}count = 52,
// CHECK-NOT:    tile.load2d
// CHECK:        tile.img2col_c04 {{.*}}fm_c1 = 1, {{.*}}fm_w = 16, {{.*}}stride_h = 2, stride_w = 2, kernel_h = 7, kernel_w = 7, {{.*}}k_start = 0, k_count = 208, fm_c1_stride = 576}
// CHECK-NEXT:   tile.mmad {{.*}}m = 16, k = 208, n = 64, init = 1}
// CHECK-NOT:    tile.load2d
// CHECK:      func.func @conv2d_1(
// CHECK-NOT:    c04
// CHECK-NOT:    tile.img2col_c04
// CHECK:        tile.img2col {{.*}}fm_c1 = 1,
// CHECK:      func.func @trans_data_2(%{{.*}}: memref<243xf32, #tile<space gm>>, %{{.*}}: memref<324xf16, #tile<space gm>>)
// CHECK:        tile.vec {{.*}}count = 1024, {{.*}}op = "dup"
// CHECK:        tile.copy {{.*}}dst_offset = 0, nburst = 1, burst = 324,
// CHECK:        tile.vec {{.*}}op = "cast"
// CHECK:        tile.copy {{.*}}dst_offset = 0, nburst = 81, burst = 1, src_stride = 1, dst_stride = 4}
// CHECK:        tile.copy {{.*}}dst_offset = 1, nburst = 81, burst = 1, src_stride = 1, dst_stride = 4}
// CHECK:        tile.copy {{.*}}dst_offset = 2, nburst = 81, burst = 1, src_stride = 1, dst_stride = 4}
// CHECK-NOT:    dst_offset = 3,
// CHECK:      func.func @conv2d_2({{.*}}c04 = 1
// CHECK:        tile.img2col_c04 {{.*}}kernel_h = 3, kernel_w = 3,
// CHECK:      func.func @main

// ASM:        ascend.kernel @conv2d_0
// ASM:          ascend.img2col_c04 {{.*}}k_count=208
// ASM:        ascend.kernel @conv2d_1
// ASM-NOT:      ascend.img2col_c04
// ASM:          ascend.img2col

// OFF:        func.func @trans_data_0(%{{.*}}: memref<768xf32, #tile<space gm>>, %{{.*}}: memref<4096xf16, #tile<space gm>>)
// OFF:        func.func @conv2d_0(
// OFF-NOT:      tile.img2col_c04
// OFF:          tile.img2col {{.*}}kernel_h = 7, kernel_w = 7,
// OFF:          tile.mmad {{.*}}n = 16

builtin.module {
  func.func @main(%x: tensor<1x3x16x16xf32> {graph.name = "x"}, %x2: tensor<1x16x8x8xf32> {graph.name = "x2"}, %x3: tensor<1x3x9x9xf32> {graph.name = "x3"}) -> (tensor<1x64x8x8xf32> {graph.name = "y0"}, tensor<1x16x8x8xf32> {graph.name = "y1"}, tensor<1x16x9x9xf32> {graph.name = "y2"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<64x3x7x7xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<64xf32>
    %w2 = graph.constant dense<2.500000e-01> : tensor<16x16x3x3xf32>
    %b2 = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %y0 = graph.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x16x16xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
    %y1 = graph.conv2d %x2, %w2, %b2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>, tensor<16xf32>) -> tensor<1x16x8x8xf32>
    %w3 = graph.constant dense<2.500000e-01> : tensor<16x3x3x3xf32>
    %y2 = graph.conv2d %x3, %w3, %b2 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x9x9xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x9x9xf32>
    func.return %y0, %y1, %y2 : tensor<1x64x8x8xf32>, tensor<1x16x8x8xf32>, tensor<1x16x9x9xf32>
  }
}
