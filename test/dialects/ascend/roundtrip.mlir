// RUN: cann-opt %s | filecheck %s
// RUN: cann-opt %s --print-op-generic | cann-opt | filecheck %s
// RUN: cann-opt %s | cann-opt | filecheck %s
// Instructions have memory effects: dce, canonicalize and cse must keep every one of them.
// RUN: cann-opt %s -p dce,canonicalize,cse | filecheck %s
// RUN: cann-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// One instruction of every group, as a kernel would hold them.
// CHECK-LABEL: ascend.kernel @matmul_relu attributes {block_dim = 2 : i64, num_args = 3 : i64} {
// GENERIC: "ascend.kernel"() <{sym_name = "matmul_relu", block_dim = 2 : i64, num_args = 3 : i64}> ({
ascend.kernel @matmul_relu attributes {block_dim = 2 : i64, num_args = 3 : i64} {
  // CHECK-NEXT: ascend.copy_gm_to_l1 dst=0, src_arg=0, src=1024, nburst=16, burst=32, src_stride=64, dst_stride=32
  // GENERIC: "ascend.copy_gm_to_l1"() <{dst = 0 : i64, src_arg = 0 : i64, src = 1024 : i64, nburst = 16 : i64, burst = 32 : i64, src_stride = 64 : i64, dst_stride = 32 : i64}> : () -> ()
  ascend.copy_gm_to_l1 dst=0, src_arg=0, src=1024, nburst=16, burst=32, src_stride=64, dst_stride=32
  // CHECK-NEXT: ascend.copy_gm_to_l1_nd2nz dtype=0, dst=512, src_arg=1, src=0, rows=16, cols=16, src_row_stride=32
  ascend.copy_gm_to_l1_nd2nz dtype=0, dst=512, src_arg=1, src=0, rows=16, cols=16, src_row_stride=32
  // CHECK-NEXT: ascend.set_flag src_pipe=4, dst_pipe=3, event=0
  ascend.set_flag src_pipe=4, dst_pipe=3, event=0
  // CHECK-NEXT: ascend.wait_flag src_pipe=4, dst_pipe=3, event=0
  ascend.wait_flag src_pipe=4, dst_pipe=3, event=0
  // CHECK-NEXT: ascend.load2d dst_space=1, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
  ascend.load2d dst_space=1, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
  // CHECK-NEXT: ascend.img2col dtype=0, dst=0, src=0, fm_c1=1, fm_h=4, fm_w=4, pad_t=1, pad_b=1, pad_l=1, pad_r=1, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0, m_count=16, k_start=0, k_count=144, fm_c1_stride=512
  ascend.img2col dtype=0, dst=0, src=0, fm_c1=1, fm_h=4, fm_w=4, pad_t=1, pad_b=1, pad_l=1, pad_r=1, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0, m_count=16, k_start=0, k_count=144, fm_c1_stride=512
  // CHECK-NEXT: ascend.load2d dst_space=2, dst=0, src=512, repeat=1, src_stride=512, dst_stride=512
  ascend.load2d dst_space=2, dst=0, src=512, repeat=1, src_stride=512, dst_stride=512
  // CHECK-NEXT: ascend.pipe_barrier pipe=6
  ascend.pipe_barrier pipe=6
  // CHECK-NEXT: ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
  // CHECK-NEXT: ascend.pipe_barrier pipe=2
  ascend.pipe_barrier pipe=2
  // CHECK-NEXT: ascend.copy_l0c_to_ub dtype=0, dst=0, src=0, n1=1, m=16, src_m=16
  ascend.copy_l0c_to_ub dtype=0, dst=0, src=0, n1=1, m=16, src_m=16
  // CHECK-NEXT: ascend.vrelu dtype=0, dst=0, src0=0, src1=0, repeat=2, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.000000e+00
  ascend.vrelu dtype=0, dst=0, src0=0, src1=0, repeat=2, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
  // Floats: %.6e when exact, else 17 significant digits; integers are accepted; inf/nan by name.
  // CHECK-NEXT: ascend.vadds dtype=0, {{.*}}, scalar=5.000000e-01
  ascend.vadds dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.5
  // CHECK-NEXT: ascend.vmuls dtype=1, {{.*}}, scalar=3.3333333333333331e-01
  ascend.vmuls dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.33333333333333331
  // CHECK-NEXT: ascend.vmaxs dtype=1, {{.*}}, scalar=-2.000000e+00
  ascend.vmaxs dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=-2
  // CHECK-NEXT: ascend.vdup dtype=1, {{.*}}, scalar=-inf
  ascend.vdup dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=-inf
  // CHECK-NEXT: ascend.vdup dtype=1, {{.*}}, scalar=nan
  ascend.vdup dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=nan
  // CHECK-NEXT: ascend.vconv_f162f32 dtype=0, {{.*}}, mask=64,
  ascend.vconv_f162f32 dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=4, src1_rep=8, scalar=0.0
  // CHECK-NEXT: ascend.vcadd dtype=1,
  ascend.vcadd dtype=1, dst=0, src0=0, src1=0, repeat=4, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
  // CHECK-NEXT: ascend.vbrcb dtype=0,
  ascend.vbrcb dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
  // CHECK-NEXT: ascend.copy_ub_to_gm dst_arg=2, dst=0, src=0, nburst=1, burst=512, src_stride=0, dst_stride=0
  ascend.copy_ub_to_gm dst_arg=2, dst=0, src=0, nburst=1, burst=512, src_stride=0, dst_stride=0
  // CHECK-NEXT: ascend.pipe_barrier pipe=6
  ascend.pipe_barrier pipe=6
// CHECK-NEXT: }
}

// A module may hold several kernels; an empty kernel prints as an empty region.
// CHECK: ascend.kernel @empty attributes {block_dim = 1 : i64, num_args = 0 : i64} {
// CHECK-NEXT: }
ascend.kernel @empty attributes {block_dim = 1 : i64, num_args = 0 : i64} {
}
// Other attributes are kept after block_dim and num_args.
// CHECK: ascend.kernel @tagged attributes {block_dim = 32 : i64, num_args = 1 : i64, note = "x"} {
// CHECK-NEXT: ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=32, src_stride=0, dst_stride=0
ascend.kernel @tagged attributes {note = "x", num_args = 1 : i64, block_dim = 32 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=32, src_stride=0, dst_stride=0
}
