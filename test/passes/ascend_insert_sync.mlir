// RUN: cann-opt %s -p ascend-insert-sync | filecheck %s
// RUN: cann-opt %s -p 'ascend-insert-sync{mode=barrier}' | filecheck %s
// Idempotent: a second run adds nothing.
// RUN: cann-opt %s -p ascend-insert-sync,ascend-insert-sync | filecheck %s
// RUN: cann-opt %s -p ascend-insert-sync | cann-opt -p ascend-insert-sync | filecheck %s
// RUN: not cann-opt %s -p 'ascend-insert-sync{mode=bogus}' 2>&1 | filecheck %s --check-prefix=MODE
// MODE: error: ascend-insert-sync: unknown mode 'bogus' (known: barrier, flags)

// A pipe change gets one PIPE_ALL barrier; same-pipe runs get none; one barrier at the end.
// CHECK-LABEL: ascend.kernel @vec_add
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0, src_arg=0,
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=256, src_arg=1,
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.vadd
// CHECK-NEXT:    ascend.vmuls
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
ascend.kernel @vec_add attributes {block_dim = 1 : i64, num_args = 3 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=256, src_arg=1, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadd dtype=0, dst=512, src0=0, src1=256, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
  ascend.vmuls dtype=0, dst=512, src0=512, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=2.0
  ascend.copy_ub_to_gm dst_arg=2, dst=0, src=512, nburst=1, burst=256, src_stride=0, dst_stride=0
}

// Existing syncs stay; a PIPE_ALL barrier or a matching set_flag/wait_flag pair between the two
// pipes counts; a single-pipe barrier or an unrelated flag pair does not (a barrier goes right
// before the second instruction); a kernel already ending with PIPE_ALL gets no extra one.
// CHECK-LABEL: ascend.kernel @cube
// CHECK-NEXT:    ascend.copy_gm_to_l1 dst=0,
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=3, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=3, event=0
// CHECK-NEXT:    ascend.load2d dst_space=1,
// CHECK-NEXT:    ascend.load2d dst_space=2,
// CHECK-NEXT:    ascend.pipe_barrier pipe=3
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.mmad
// CHECK-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=3, event=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=3, event=1
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.copy_l0c_to_ub
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
ascend.kernel @cube attributes {block_dim = 2 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_l1 dst=0, src_arg=0, src=0, nburst=1, burst=1024, src_stride=0, dst_stride=0
  ascend.set_flag src_pipe=4, dst_pipe=3, event=0
  ascend.wait_flag src_pipe=4, dst_pipe=3, event=0
  ascend.load2d dst_space=1, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
  ascend.load2d dst_space=2, dst=0, src=512, repeat=1, src_stride=512, dst_stride=512
  ascend.pipe_barrier pipe=3
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
  ascend.set_flag src_pipe=2, dst_pipe=3, event=1
  ascend.wait_flag src_pipe=2, dst_pipe=3, event=1
  ascend.copy_l0c_to_ub dtype=0, dst=0, src=0, n1=1, m=16, src_m=16
  ascend.pipe_barrier pipe=6
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=512, src_stride=0, dst_stride=0
  ascend.pipe_barrier pipe=6
}

// One pipe only: just the final barrier. An empty kernel stays empty.
// CHECK-LABEL: ascend.kernel @one_pipe
// CHECK-NEXT:    ascend.vexp
// CHECK-NEXT:    ascend.vln
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
// CHECK-LABEL: ascend.kernel @empty
// CHECK-NEXT:  }
ascend.kernel @one_pipe attributes {block_dim = 1 : i64, num_args = 0 : i64} {
  ascend.vexp dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
  ascend.vln dtype=1, dst=0, src0=0, src1=0, repeat=1, mask=64, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=0.0
}
ascend.kernel @empty attributes {block_dim = 1 : i64, num_args = 0 : i64} {
}
