// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vadd dtype=17, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: dtype must be one of [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] (float16, float32, int32, int16, uint8, int64, int8, uint16, uint32, bfloat16), got 17

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vexp dtype=2, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: vexp does not compute on int32 (dtype 2); it takes 0=float16, 1=float32

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vconv src_dtype=4, dst_dtype=1, round=0, dst=0, src0=0, repeat=1, mask=64, dst_rep=8, src0_rep=8
}
// CHECK: no vconv from uint8 to float32

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vadd dtype=0, dst=0, src0=0, src1=0, repeat=0, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: repeat must be in 1..255, got 0

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vexp dtype=0, dst=0, src0=0, src1=0, repeat=256, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: repeat must be in 1..255, got 256

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vmul dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: mask must be in 1..64, got 128

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vmul dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=0, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: mask must be in 1..128, got 0

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vconv_f162f32 dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=4, src1_rep=8, scalar=0.0
}
// CHECK: mask must be in 1..64, got 128

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.vsub dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=-8, src0_rep=8, src1_rep=8, scalar=0.0
}
// CHECK: dst_rep must be >= 0, got -8

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=0, burst=32, src_stride=0, dst_stride=0
}
// CHECK: nburst must be >= 1, got 0

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=0, src_stride=0, dst_stride=0
}
// CHECK: burst must be >= 1, got 0

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.copy_gm_to_ub dst=-32, src_arg=0, src=0, nburst=1, burst=32, src_stride=0, dst_stride=0
}
// CHECK: dst must be >= 0, got -32

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=32, src_stride=0, dst_stride=0
}
// CHECK: instruction 0 (copy_ub_to_gm): dst_arg=1 is out of range for num_args = 1

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=8, k=16, n=16, init=1
}
// CHECK: m must be a positive multiple of 16, got 8

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=24, init=1
}
// CHECK: n must be a positive multiple of 16, got 24

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.mmad dtype=1, dst=0, a=0, b=0, m=16, k=12, n=16, init=0
}
// CHECK: k must be a positive multiple of 8, got 12

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=2
}
// CHECK: init must be in 0..1, got 2

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.load2d dst_space=3, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
}
// CHECK: dst_space must be 1 (L0A) or 2 (L0B), got 3

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.img2col dtype=0, dst=0, src=0, fm_c1=1, fm_h=4, fm_w=4, pad_t=0, pad_b=0, pad_l=0, pad_r=0, stride_h=0, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0, m_count=16, k_start=0, k_count=144, fm_c1_stride=512
}
// CHECK: stride_h must be >= 1, got 0

// -----
// C1 blocks closer than a packed block (4 x 4 x 16 float16 = 512 bytes) would overlap
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.img2col dtype=0, dst=0, src=0, fm_c1=2, fm_h=4, fm_w=4, pad_t=0, pad_b=0, pad_l=0, pad_r=0, stride_h=1, stride_w=1, kernel_h=3, kernel_w=3, dil_h=1, dil_w=1, m_start=0, m_count=16, k_start=0, k_count=288, fm_c1_stride=480
}
// CHECK: fm_c1_stride must be >= 512, got 480

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.copy_l0c_to_ub dtype=0, dst=0, src=0, n1=1, m=32, src_m=16
}
// CHECK: src_m must be >= m (32), got 16

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.set_flag src_pipe=4, dst_pipe=4, event=0
}
// CHECK: src_pipe and dst_pipe must differ, both are MTE2

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.wait_flag src_pipe=6, dst_pipe=1, event=0
}
// CHECK: src_pipe must be a single pipe (0..5), got 6

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.set_flag src_pipe=4, dst_pipe=1, event=8
}
// CHECK: event must be in 0..7, got 8

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.pipe_barrier pipe=7
}
// CHECK: pipe must be in 0..6, got 7

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.pipe_barrier pipe=0
}
// CHECK: pipe_barrier does not support pipe S (0): the scalar pipe is in order

// -----
ascend.kernel @k attributes {block_dim = 0 : i64, num_args = 1 : i64} {
}
// CHECK: block_dim must be >= 1, got 0

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  "test.op"() : () -> ()
}
// CHECK: instruction 0: only ascend instructions may appear in a kernel, found test.op

// -----
"ascend.vadd"() <{dtype = 0 : i64}> : () -> ()
// CHECK: property 'dst' expected

// -----
// A kernel lives directly in a module.
func.func @f() {
  ascend.kernel @inner attributes {block_dim = 1 : i64, num_args = 0 : i64} {
  }
  func.return
}
// CHECK: 'ascend.kernel' expects parent op 'builtin.module'
