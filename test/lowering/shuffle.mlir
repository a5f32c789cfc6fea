// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=1}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{aicore_num=2 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=FP32

// graph.channel_shuffle of 40 channels (C1 = 3, 8 padding lanes) in 4 groups over 4x5 = 20 positions
// (shuffle.py), after the input's format conversion: one tile of 32 positions (two groups of 16,
// the second half empty). The three C1 blocks load in one DMA (bursts of 20 x 16 elements), each
// block's 16x16 matrices transpose into the group-major buffer (2 per block, rows of 3 x 16 channels
// per group); per group, 4 strided vmovs (one per residue r: 10 rows, the source rows r*10.. in
// steps of one row, the destination rows r, r+4, .. in steps of 4 rows) and the 8 padding rows
// zeroed; the matrices transpose back and the three blocks store in one DMA. No element bursts.
// CHECK:      func.func @channel_shuffle_0({{.*}}tile.tiling = {block_dim = 1 : i64, positions = 32 : i64}
// CHECK:        tile.copy %0, %[[A:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 3, burst = 320, src_stride = 320, dst_stride = 512}
// CHECK-NEXT:   tile.transpose_blocks %[[T:[0-9]+]], %[[A]] {dst_offset = 0, src_offset = 0, count = 2, dst_stride = 768, src_stride = 256, dst_row = 16, src_row = 16}
// CHECK-NEXT:   tile.transpose_blocks %[[T]], %[[A]] {dst_offset = 256, src_offset = 512, count = 2, dst_stride = 768, src_stride = 256, dst_row = 16, src_row = 16}
// CHECK-NEXT:   tile.transpose_blocks %[[T]], %[[A]] {dst_offset = 512, src_offset = 1024, count = 2, dst_stride = 768, src_stride = 256, dst_row = 16, src_row = 16}
// CHECK-NEXT:   tile.vec %[[P:[0-9]+]], %[[T]], {{.*}} {dst_offset = 0, src0_offset = 0, {{.*}}count = 10, unit = 16, dst_stride = 64, src0_stride = 16, {{.*}}op = "mov"}
// CHECK-NEXT:   tile.vec %[[P]], %[[T]], {{.*}} {dst_offset = 16, src0_offset = 160, {{.*}}count = 10, unit = 16, dst_stride = 64, src0_stride = 16, {{.*}}op = "mov"}
// CHECK-NEXT:   tile.vec %[[P]], %[[T]], {{.*}} {dst_offset = 32, src0_offset = 320, {{.*}}op = "mov"}
// CHECK-NEXT:   tile.vec %[[P]], %[[T]], {{.*}} {dst_offset = 48, src0_offset = 480, {{.*}}op = "mov"}
// CHECK-NEXT:   tile.vec %[[P]], {{.*}} {dst_offset = 640, {{.*}}count = 128, unit = 1, {{.*}}op = "dup"}
// CHECK-NEXT:   tile.vec %[[P]], %[[T]], {{.*}} {dst_offset = 768, src0_offset = 768, {{.*}}op = "mov"}
// CHECK-COUNT-3: tile.vec %[[P]], %[[T]], {{.*}}op = "mov"}
// CHECK-NEXT:   tile.vec %[[P]], {{.*}} {dst_offset = 1408, {{.*}}count = 128, unit = 1, {{.*}}op = "dup"}
// CHECK-NEXT:   tile.transpose_blocks %[[B:[0-9]+]], %[[P]] {dst_offset = 0, src_offset = 0, count = 2, dst_stride = 256, src_stride = 768, dst_row = 16, src_row = 16}
// CHECK-NEXT:   tile.transpose_blocks %[[B]], %[[P]] {dst_offset = 512, src_offset = 256, count = 2, dst_stride = 256, src_stride = 768, dst_row = 16, src_row = 16}
// CHECK-NEXT:   tile.transpose_blocks %[[B]], %[[P]] {dst_offset = 1024, src_offset = 512, count = 2, dst_stride = 256, src_stride = 768, dst_row = 16, src_row = 16}
// CHECK-NEXT:   tile.copy %[[B]], %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 3, burst = 320, src_stride = 512, dst_stride = 320}
// CHECK-NEXT:   func.return

// Two cores: 16 positions on core 0, the last 4 on core 1 (its GM arguments moved by 16 x 16
// elements, a guarded section of its own); float32 tiles.
// FP32:       func.func @channel_shuffle_0({{.*}}tile.block_dim = 2 : i64, tile.tiling = {block_dim = 2 : i64, positions = 16 : i64}
// FP32:         tile.block_offset %{{[0-9]+}} {stride = 256}
// FP32:         tile.copy %{{[0-9]+}}, %{{[0-9]+}} {src_offset = 0, dst_offset = 0, nburst = 3, burst = 256, src_stride = 320, dst_stride = 256} : memref<960xf32

builtin.module {
  func.func @main(%x: tensor<1x40x4x5xf32> {graph.name = "x"}) -> (tensor<1x40x4x5xf32> {graph.name = "y"}) {
    %y = graph.channel_shuffle %x {group = 4 : i64} : tensor<1x40x4x5xf32> -> tensor<1x40x4x5xf32>
    func.return %y : tensor<1x40x4x5xf32>
  }
}
