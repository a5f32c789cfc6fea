// RUN: cann-opt %s -p convert-tile-to-ascend | filecheck %s
// RUN: cann-opt %s -p 'convert-tile-to-ascend,ascend-insert-sync{mode=flags free_barriers=false}' | filecheck %s --check-prefix=SYNC
// RUN: not cann-opt %S/Inputs/loop_step_nonlinear.mlir -p convert-tile-to-ascend 2>&1 | filecheck %s --check-prefix=ERR

// tile.loop_step lowers to one ISA loop_step per field that moves, right before each instruction
// of the op it applies to: a UB offset of 256 fp16 elements is 512 bytes; the vector op's src1
// follows src0 (a scalar op reads one operand), so it steps too; GM offsets stay loop_offsets.
// CHECK-LABEL: ascend.kernel @stepped
// CHECK-NEXT:    ascend.loop_begin count=4
// CHECK-NEXT:    ascend.loop_offset arg=0, stride=512
// CHECK-NEXT:    ascend.loop_step field_no=0, step=512
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=512,
// CHECK-NEXT:    ascend.loop_step field_no=1, step=512
// CHECK-NEXT:    ascend.loop_step field_no=2, step=512
// CHECK-NEXT:    ascend.loop_step field_no=3, step=512
// CHECK-NEXT:    ascend.vadds dtype=0, dst=0, src0=0, src1=0, repeat=2,
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=2048,

// An img2col's m_start (positions) and an mmad's L0C offset (fp32 elements: 4 bytes each).
// CHECK-LABEL: ascend.kernel @cube
// CHECK:         ascend.loop_begin count=3
// CHECK-NEXT:    ascend.loop_step field_no=16, step=32
// CHECK-NEXT:    ascend.img2col {{.*}} m_start=0, m_count=32,
// CHECK-NEXT:    ascend.loop_step field_no=1, step=2048
// CHECK-NEXT:    ascend.mmad dtype=0, dst=0, a=0, b=0, m=32, k=16, n=16, init=1
// CHECK-NEXT:    ascend.loop_end

// The flag sync pass keeps each loop_step right before the work it steps (flags go between them;
// the target skips them) and sees the stepped accesses move with the loop: each iteration's copy
// writes its own UB bytes, so the vector op waits for the copy of its own iteration only and no
// later copy waits for a vector op (the copies may run ahead: the pair's events rotate over the
// 4 iterations); the final UB -> GM copy, reading every iteration's bytes, comes after the loop.
// In @cube the L0A tile is not stepped: the next img2col waits for this iteration's mmad.
// SYNC-LABEL: ascend.kernel @stepped
// SYNC:         ascend.loop_begin count=4
// SYNC-NEXT:    ascend.loop_offset arg=0, stride=512
// SYNC-NEXT:    ascend.loop_rotate_event src_pipe=4, dst_pipe=1, base=0, copies=4, step=1
// SYNC-NEXT:    ascend.loop_step field_no=0, step=512
// SYNC-NEXT:    ascend.copy_gm_to_ub dst=0,
// SYNC-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
// SYNC-NEXT:    ascend.loop_step field_no=1, step=512
// SYNC-NEXT:    ascend.loop_step field_no=2, step=512
// SYNC-NEXT:    ascend.loop_step field_no=3, step=512
// SYNC-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// SYNC-NEXT:    ascend.vadds
// SYNC-NEXT:    ascend.loop_end
// SYNC-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=0
// SYNC-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=5, event=0
// SYNC-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// SYNC-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=5, event=0
// SYNC-NEXT:    ascend.copy_ub_to_gm
// SYNC-LABEL: ascend.kernel @cube
// SYNC:         ascend.set_flag src_pipe=2, dst_pipe=3, event=0
// SYNC-NEXT:    ascend.loop_begin count=3
// SYNC-NEXT:    ascend.loop_step field_no=16, step=32
// SYNC-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=3, event=0
// SYNC-NEXT:    ascend.img2col
// SYNC-NEXT:    ascend.set_flag src_pipe=3, dst_pipe=2, event=0
// SYNC-NEXT:    ascend.loop_step field_no=1, step=2048
// SYNC-NEXT:    ascend.wait_flag src_pipe=3, dst_pipe=2, event=0
// SYNC-NEXT:    ascend.mmad
// SYNC-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=3, event=0
// SYNC-NEXT:    ascend.loop_end

// ERR: error: @bad: tile.loop_step of tile.vec: its instructions change with the step (not a linear step)

func.func @stepped(%a: memref<1024xf16, #tile<space gm>>, %b: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<1024xf16, #tile<space ub>>
  tile.loop_begin {count = 4 : i64}
  tile.loop_offset %a {stride = 256} : memref<1024xf16, #tile<space gm>>
  tile.loop_step {field = "dst_offset", step = 256 : i64}
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<1024xf16, #tile<space ub>>
  tile.loop_step {field = "dst_offset", step = 256 : i64}
  tile.loop_step {field = "src0_offset", step = 256 : i64}
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 1.0, op = "adds"} : memref<1024xf16, #tile<space ub>>, memref<1024xf16, #tile<space ub>>, memref<1024xf16, #tile<space ub>>
  tile.loop_end
  tile.copy %x, %b {src_offset = 0, dst_offset = 0, nburst = 1, burst = 1024, src_stride = 1024, dst_stride = 1024} : memref<1024xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  func.return
}

func.func @cube(%x: memref<2048xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %fm = tile.alloc : memref<2048xf16, #tile<space l1>>
  %a = tile.alloc : memref<512xf16, #tile<space l0a>>
  %b = tile.alloc : memref<256xf16, #tile<space l0b>>
  %c = tile.alloc : memref<1536xf32, #tile<space l0c>>
  tile.copy %x, %fm {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<2048xf16, #tile<space gm>>, memref<2048xf16, #tile<space l1>>
  tile.loop_begin {count = 3 : i64}
  tile.loop_step {field = "m_start", step = 32 : i64}
  tile.img2col %fm, %a {src_offset = 0, dst_offset = 0, fm_c1 = 1, fm_h = 8, fm_w = 16, pad_t = 0, pad_b = 0, pad_l = 0, pad_r = 0, stride_h = 1, stride_w = 1, kernel_h = 1, kernel_w = 1, dil_h = 1, dil_w = 1, m_start = 0, m_count = 32, k_start = 0, k_count = 16, fm_c1_stride = 2048} : memref<2048xf16, #tile<space l1>>, memref<512xf16, #tile<space l0a>>
  tile.loop_step {field = "c_offset", step = 512 : i64}
  tile.mmad %a, %b, %c {a_offset = 0, b_offset = 0, c_offset = 0, m = 32, k = 16, n = 16, init = 1} : memref<512xf16, #tile<space l0a>>, memref<256xf16, #tile<space l0b>>, memref<1536xf32, #tile<space l0c>>
  tile.loop_end
  func.return
}
