// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=F32
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1 precision_mode=force_fp16}' | filecheck %s --check-prefix=F16

// Grouped 1x1 Conv, 3 groups of 8 -> 16 channels (grouped_runs.py: no super-group, the input's 24
// channels are no whole C1 blocks). float32 (K0 = 8): runs over 8-channel slices, one per output
// block, K = 8 each, rolled into one hardware loop whose img2col k_start is 0 + i*(-8) +
// clamp(16*i, 0, 16) = 0, 8, 0 (input blocks 0, 0, 1): the second run reads its group's half of
// block 0 from K column 8, so no 16x8 fractal holds only the other group's lanes. float16 (must-not): whole blocks; output blocks 0-1 (groups
// 0 and 1, both in input block 0) are one run, K = 16 from column 0.

// F32:      func.func @gconv2d_0(
// F32:        tile.loop_begin {count = 3 : i64}
// F32:        tile.loop_step {field = "k_start", step = -8 : i64}
// F32-NEXT:   tile.loop_step {field = "k_start", step = 16 : i64, offset = 0 : i64, lo = 0 : i64, hi = 16 : i64}
// F32-NEXT:   tile.img2col {{.*}}fm_c1 = 1, {{.*}}k_start = 0, k_count = 8, fm_c1_stride = 256}
// F32-NEXT:   tile.mmad {{.*}}k = 8, n = 16,
// F32:        tile.loop_end
// F32-NOT:    tile.img2col

// F16:      func.func @gconv2d_0(
// F16:        tile.img2col {{.*}}fm_c1 = 1, {{.*}}k_start = 0, k_count = 16, fm_c1_stride = 256}
// F16:        tile.mmad {{.*}}k = 16, n = 32,
// F16:        tile.img2col {{.*}}fm_c1 = 1, {{.*}}k_start = 0, k_count = 16, fm_c1_stride = 256}
// F16:        tile.mmad {{.*}}k = 16, n = 16,
// F16-NOT:    tile.img2col

builtin.module {
  func.func @main(%x: tensor<1x24x4x4xf32> {graph.name = "x"}) -> (tensor<1x48x4x4xf32> {graph.name = "y"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<48x8x1x1xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<48xf32>
    %y = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 3 : i64} : (tensor<1x24x4x4xf32>, tensor<48x8x1x1xf32>, tensor<48xf32>) -> tensor<1x48x4x4xf32>
    func.return %y : tensor<1x48x4x4xf32>
  }
}
