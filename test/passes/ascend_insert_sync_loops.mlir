// RUN: cann-opt %s -p ascend-insert-sync | filecheck %s

// A loop body runs again after its last instruction: the pass orders the back edge with a
// barrier before loop_end (MTE3 of one iteration before MTE2 of the next).
// CHECK:      ascend.loop_begin count=4
// CHECK-NEXT: ascend.loop_offset arg=0, stride=256
// CHECK-NEXT: ascend.copy_gm_to_ub
// CHECK-NEXT: ascend.pipe_barrier pipe=6
// CHECK-NEXT: ascend.copy_ub_to_gm
// CHECK-NEXT: ascend.pipe_barrier pipe=6
// CHECK-NEXT: ascend.loop_end
// CHECK-NEXT: ascend.pipe_barrier pipe=6
// CHECK-NEXT: }
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.loop_begin count=4
  ascend.loop_offset arg=0, stride=256
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=256, dst_stride=256
  ascend.copy_ub_to_gm dst_arg=0, dst=0, src=0, nburst=1, burst=256, src_stride=256, dst_stride=256
  ascend.loop_end
}
