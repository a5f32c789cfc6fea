// RUN: cann-opt %s -p convert-tile-to-ascend | filecheck %s
// RUN: not cann-opt %S/Inputs/loop_clamp_constant.mlir -p convert-tile-to-ascend 2>&1 | filecheck %s --check-prefix=ERR

// A clamped tile.loop_step lowers to an ISA loop_clamp per field its property moves, scaled to the
// field's unit: a tail moved back to end at the tensor's edge (GM element offsets clamped to
// [0, 192] elements = [0, 384] bytes), and a pad that only the first iteration has (img2col's pad_t
// 1 + clamp(-i, -1, 0): no scaling). A plain step stays a loop_step.
// CHECK-LABEL: ascend.kernel @tail
// CHECK-NEXT:    ascend.loop_begin count=3
// CHECK-NEXT:    ascend.loop_clamp field_no=2, step=256, offset=0, lo=0, hi=384, up=0
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256,
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.loop_clamp field_no=1, step=256, offset=0, lo=0, hi=384, up=0
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=256,
// CHECK-NEXT:    ascend.loop_end

// CHECK-LABEL: ascend.kernel @pads
// CHECK:         ascend.loop_begin count=2
// CHECK-NEXT:    ascend.loop_step field_no=16, step=32
// CHECK-NEXT:    ascend.loop_clamp field_no=6, step=-1, offset=0, lo=-1, hi=0, up=0
// CHECK-NEXT:    ascend.img2col {{.*}} pad_t=1, pad_b=0,
// CHECK-NEXT:    ascend.loop_end

// A step of an outer loop on an op of a nested loop (up = 1) lowers to a loop_clamp naming that
// loop; a linear one is a clamp that never binds.
// CHECK-LABEL: ascend.kernel @nested
// CHECK:         ascend.loop_begin count=2
// CHECK-NEXT:    ascend.loop_begin count=3
// CHECK-NEXT:    ascend.loop_step field_no=16, step=32
// CHECK-NEXT:    ascend.loop_clamp field_no=18, step=16, offset=0, lo=-4611686018427387904, hi=4611686018427387904, up=1
// CHECK-NEXT:    ascend.img2col {{.*}} m_start=0, m_count=32, k_start=0, k_count=16
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.loop_end

// ERR: error: @bad: tile.loop_step of tile.copy: the clamp of 'src_offset' never moves it (lo = hi = 0)

func.func @tail(%a: memref<320xf16, #tile<space gm>>, %b: memref<320xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<128xf16, #tile<space ub>>
  tile.loop_begin {count = 3 : i64}
  tile.loop_step {field = "src_offset", step = 128 : i64, offset = 0 : i64, lo = 0 : i64, hi = 192 : i64}
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<320xf16, #tile<space gm>>, memref<128xf16, #tile<space ub>>
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 128, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 1.0, op = "adds"} : memref<128xf16, #tile<space ub>>, memref<128xf16, #tile<space ub>>, memref<128xf16, #tile<space ub>>
  tile.loop_step {field = "dst_offset", step = 128 : i64, offset = 0 : i64, lo = 0 : i64, hi = 192 : i64}
  tile.copy %x, %b {src_offset = 0, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<128xf16, #tile<space ub>>, memref<320xf16, #tile<space gm>>
  tile.loop_end
  func.return
}

func.func @pads(%x: memref<2048xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %fm = tile.alloc : memref<2048xf16, #tile<space l1>>
  %a = tile.alloc : memref<512xf16, #tile<space l0a>>
  tile.copy %x, %fm {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<2048xf16, #tile<space gm>>, memref<2048xf16, #tile<space l1>>
  tile.loop_begin {count = 2 : i64}
  tile.loop_step {field = "m_start", step = 32 : i64}
  tile.loop_step {field = "pad_t", step = -1 : i64, offset = 0 : i64, lo = -1 : i64, hi = 0 : i64}
  tile.img2col %fm, %a {src_offset = 0, dst_offset = 0, fm_c1 = 1, fm_h = 8, fm_w = 16, pad_t = 1, pad_b = 0, pad_l = 0, pad_r = 0, stride_h = 1, stride_w = 1, kernel_h = 3, kernel_w = 1, dil_h = 1, dil_w = 1, m_start = 0, m_count = 32, k_start = 0, k_count = 48, fm_c1_stride = 2048} : memref<2048xf16, #tile<space l1>>, memref<512xf16, #tile<space l0a>>
  tile.loop_end
  func.return
}

func.func @nested(%x: memref<2048xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %fm = tile.alloc : memref<2048xf16, #tile<space l1>>
  %a = tile.alloc : memref<512xf16, #tile<space l0a>>
  tile.copy %x, %fm {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<2048xf16, #tile<space gm>>, memref<2048xf16, #tile<space l1>>
  tile.loop_begin {count = 2 : i64}
  tile.loop_begin {count = 3 : i64}
  tile.loop_step {field = "m_start", step = 32 : i64}
  tile.loop_step {field = "k_start", step = 16 : i64, up = 1 : i64}
  tile.img2col %fm, %a {src_offset = 0, dst_offset = 0, fm_c1 = 2, fm_h = 8, fm_w = 8, pad_t = 0, pad_b = 0, pad_l = 0, pad_r = 0, stride_h = 1, stride_w = 1, kernel_h = 1, kernel_w = 1, dil_h = 1, dil_w = 1, m_start = 0, m_count = 32, k_start = 0, k_count = 16, fm_c1_stride = 1024} : memref<2048xf16, #tile<space l1>>, memref<512xf16, #tile<space l0a>>
  tile.loop_end
  tile.loop_end
  func.return
}
