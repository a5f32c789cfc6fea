// RUN: cann-opt %s -p 'ascend-insert-sync{mode=flags free_barriers=false}' | filecheck %s
// Idempotent: existing sync is dropped and recomputed.
// RUN: cann-opt %s -p 'ascend-insert-sync{mode=flags free_barriers=false},ascend-insert-sync{mode=flags free_barriers=false}' | filecheck %s
// Default free_barriers=true: a chain that cannot overlap gets one barrier per hop instead of a pair.
// RUN: cann-opt %s -p 'ascend-insert-sync{mode=flags}' | filecheck %s --check-prefix=FREE
// Two different loop_rotate regions over the same bytes: refused, naming the kernel and the regions.
// RUN: printf 'ascend.kernel @bad attributes {block_dim = 1 : i64, num_args = 1 : i64} {\nascend.loop_begin count=2\nascend.loop_rotate space=5, base=0, size=256, copies=2, step=1\nascend.loop_rotate space=5, base=256, size=512, copies=2, step=1\nascend.loop_end\n}\n' | not cann-opt -p 'ascend-insert-sync{mode=flags}' 2>&1 | filecheck %s --check-prefix=ERR
// ERR: error: ascend-insert-sync: kernel 'bad': loop_rotate regions [0, 512) and [256, 1280) of ub overlap: ascend-insert-sync cannot order them
// Unbalanced control and loop control outside a loop: refused, naming the kernel.
// RUN: printf 'ascend.kernel @bad attributes {block_dim = 1 : i64, num_args = 1 : i64} {\nascend.loop_end\n}\n' | not cann-opt -p 'ascend-insert-sync{mode=flags}' 2>&1 | filecheck %s --check-prefix=UNBAL
// UNBAL: error: ascend-insert-sync: kernel 'bad': loop_end without a matching loop_begin
// RUN: printf 'ascend.kernel @bad attributes {block_dim = 1 : i64, num_args = 1 : i64} {\nascend.loop_offset arg=0, stride=4\n}\n' | not cann-opt -p 'ascend-insert-sync{mode=flags}' 2>&1 | filecheck %s --check-prefix=OUTSIDE
// OUTSIDE: error: ascend-insert-sync: kernel 'bad': loop_offset outside a loop_begin .. loop_end

// RAW: the set goes right after the producer (the first load), the wait right before the consumer;
// the second load's consumer (MTE3) gets its own pair 4->5.
// CHECK-LABEL: ascend.kernel @raw
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0,
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=4096,
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0,
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=256,
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
// Free barriers keep these pairs: a barrier before vadds would wait for the second load.
// FREE-LABEL: ascend.kernel @raw
// FREE-NEXT:    ascend.copy_gm_to_ub dst=0,
// FREE-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
ascend.kernel @raw attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=4096, src_arg=0, src=4096, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=512, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=512, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_ub_to_gm dst_arg=1, dst=256, src=4096, nburst=1, burst=256, src_stride=0, dst_stride=0
}

// WAW (vdup and the load write UB 0) and WAR (vadds reads UB 0, the load overwrites it): one pair
// after the later producer covers both; RAW vadds -> store.
// CHECK-LABEL: ascend.kernel @war_waw
// CHECK-NEXT:    ascend.vdup
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
ascend.kernel @war_waw attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.vdup dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=256, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
}

// GM by kernel argument: the store to argument 1 [0, 256) orders only the load overlapping it;
// the loads of argument 0 and of argument 1 [256, 512) (independent, on another pipe) get nothing.
// CHECK-LABEL: ascend.kernel @gm
// CHECK:         ascend.copy_ub_to_gm dst_arg=1, dst=0,
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=1024, src_arg=0,
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=2048, src_arg=1, src=256,
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=3072, src_arg=1, src=128,
ascend.kernel @gm attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.vdup dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=1024, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=2048, src_arg=1, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=3072, src_arg=1, src=128, nburst=1, burst=256, src_stride=0, dst_stride=0
}

// Must not: instructions on different pipes touching different bytes get no sync at all.
// CHECK-LABEL: ascend.kernel @independent
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0,
// CHECK-NEXT:    ascend.vdup
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0, src=8192,
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
ascend.kernel @independent attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vdup dtype=0, dst=4096, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=8192, nburst=1, burst=256, src_stride=0, dst_stride=0
}

// An implied dependence gets no second pair: the store reads the load's bytes too, but the V wait
// already imported MTE2's clock, so V -> MTE3 orders both.
// CHECK-LABEL: ascend.kernel @implied
// CHECK-NOT:     src_pipe=4, dst_pipe=5
// CHECK:         ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
// With free barriers this chain (nothing can overlap) gets one barrier per hop instead of a pair.
// FREE-LABEL: ascend.kernel @implied
// FREE-NEXT:    ascend.copy_gm_to_ub
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.vadds
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.copy_ub_to_gm
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:  }
ascend.kernel @implied attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=512, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=768, src_stride=0, dst_stride=0
}

// Event reuse only when safe in time: the second 4->1 pair comes after the first one's wait in program
// order, but MTE2 is not ordered after that wait (nothing tells it V has run), so it could set id 0
// while it is still set: it takes id 1.
// CHECK-LABEL: ascend.kernel @reuse
// CHECK:         ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// CHECK:         ascend.set_flag src_pipe=4, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=1
ascend.kernel @reuse attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=512, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_gm_to_ub dst=1024, src_arg=0, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=1536, src0=1024, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
}

// Exhaustion: seven loads in flight to seven consumers, six usable ids (8 - 2 reserved). No id can
// be reused safely (MTE2 is never ordered after a wait of V, so it could set a flag still set): the
// seventh consumer gets a barrier.
// CHECK-LABEL: ascend.kernel @exhaust
// CHECK-COUNT-6: ascend.set_flag src_pipe=4, dst_pipe=1
// CHECK:         ascend.wait_flag src_pipe=4, dst_pipe=1, event=5
// CHECK-NEXT:    ascend.vadds dtype=0, dst=4096, src0=1280,
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.vadds dtype=0, dst=4096, src0=1536,
ascend.kernel @exhaust attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=256, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=512, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=768, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=1024, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=1280, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_gm_to_ub dst=1536, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=4096, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=4096, src0=256, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=4096, src0=512, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=4096, src0=768, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=4096, src0=1024, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=4096, src0=1280, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.vadds dtype=0, dst=4096, src0=1536, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
}

// Scalar registers: MTE2 fills the index buffer, S loads r0 from it, MTE2 copies by r0.
// CHECK-LABEL: ascend.kernel @sreg
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=0, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=0, event=0
// CHECK-NEXT:    ascend.ld_idx
// CHECK-NEXT:    ascend.set_flag src_pipe=0, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=0, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub_reg
ascend.kernel @sreg attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=32, src_stride=0, dst_stride=0
  ascend.ld_idx reg=0, dtype=0, src=0, bound=8
  ascend.copy_gm_to_ub_reg dst=256, src_arg=1, src=0, nburst=1, burst=32, src_stride=0, dst_stride=0, reg=0, reg_stride=32
}

// A loop on single buffers: loop-carried WAR at distance 1 (V of iteration k reads UB 0, the load
// of k+1 overwrites it; the store of k reads UB 256, vadds of k+1 overwrites it), one id each,
// pre-set before the loop and drained after it.
// CHECK-LABEL: ascend.kernel @loop
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.loop_begin count=4
// CHECK-NEXT:    ascend.loop_offset arg=0
// CHECK-NEXT:    ascend.loop_offset arg=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
// With free barriers, single buffers: a barrier before vadds (after the load and the previous
// store) and one before the store (which the next load may overlap: it only waits for vadds).
// FREE-LABEL: ascend.kernel @loop
// FREE-NEXT:    ascend.loop_begin count=4
// FREE-NEXT:    ascend.loop_offset arg=0
// FREE-NEXT:    ascend.loop_offset arg=1
// FREE-NEXT:    ascend.copy_gm_to_ub
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.vadds
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.copy_ub_to_gm
// FREE-NEXT:    ascend.loop_end
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:  }
// The back edge alone (in-place vadds): its barrier goes at the end of the body.
// FREE-LABEL: ascend.kernel @inplace
// FREE-NEXT:    ascend.loop_begin count=4
// FREE-NEXT:    ascend.loop_offset arg=0
// FREE-NEXT:    ascend.loop_offset arg=1
// FREE-NEXT:    ascend.copy_gm_to_ub
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.vadds
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.copy_ub_to_gm
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:    ascend.loop_end
// FREE-NEXT:    ascend.pipe_barrier pipe=6
// FREE-NEXT:  }
ascend.kernel @loop attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.loop_begin count=4
  ascend.loop_offset arg=0, stride=256
  ascend.loop_offset arg=1, stride=256
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=256, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_end
}

ascend.kernel @inplace attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.loop_begin count=4
  ascend.loop_offset arg=0, stride=256
  ascend.loop_offset arg=1, stride=256
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_end
}

// Double buffers (loop_rotate copies=2 step=1): the WARs land on the same copy two iterations
// later, so each uses two ids rotating with loop_rotate_event, both pre-set and both drained. The
// RAWs within an iteration rotate over two ids as well (no pre-set, no drain): with two copies the
// producer may run an iteration ahead of its consumer, and one id would be set again before the
// previous iteration's wait cleared it.
// CHECK-LABEL: ascend.kernel @rotated
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=1
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.loop_begin count=8
// CHECK-NEXT:    ascend.loop_offset arg=0
// CHECK-NEXT:    ascend.loop_offset arg=1
// CHECK-NEXT:    ascend.loop_rotate space=5, base=0,
// CHECK-NEXT:    ascend.loop_rotate space=5, base=512,
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=1, dst_pipe=4, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=4, dst_pipe=1, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=5, dst_pipe=1, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=1, dst_pipe=5, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
// Free barriers never replace a pair that lets pipes overlap: the rotated loop keeps its pairs.
// FREE-LABEL: ascend.kernel @rotated
// FREE-NOT:     pipe_barrier
// FREE:         ascend.loop_end
ascend.kernel @rotated attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.loop_begin count=8
  ascend.loop_offset arg=0, stride=256
  ascend.loop_offset arg=1, stride=256
  ascend.loop_rotate space=5, base=0, size=256, copies=2, step=1
  ascend.loop_rotate space=5, base=512, size=256, copies=2, step=1
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=512, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=512, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_end
}

// A loop-carried RAW whose producer precedes its consumer in the body (vadds of iteration k reads
// the copy the load of k-1 wrote): the wait is one id ahead of the set (copies = distance + 1),
// the id the first iteration waits for is pre-set, and the last iteration's set drained. The WAR
// back (V reads a copy MTE2 refills an iteration later) rotates over two ids too: V may run an
// iteration ahead of MTE2's wait. The loop is no fence: the copy after it waits for the vector
// unit's last write only (a flag pair from the loop's end).
// CHECK-LABEL: ascend.kernel @forward
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=1
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.loop_begin count=8
// CHECK-NEXT:    ascend.loop_offset
// CHECK-NEXT:    ascend.loop_rotate
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=1, dst_pipe=4, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=4, dst_pipe=1, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=1
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
ascend.kernel @forward attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.loop_begin count=8
  ascend.loop_offset arg=0, stride=256
  ascend.loop_rotate space=5, base=0, size=256, copies=2, step=1
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=4096, src0=256, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.loop_end
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=4096, nburst=1, burst=256, src_stride=0, dst_stride=0
}

// Exhaustion with no later point: seven copies put the WAR seven iterations apart, which needs
// seven rotating ids, one more than the six usable: a barrier orders the back edge instead.
// CHECK-LABEL: ascend.kernel @toofar
// CHECK-NOT:     loop_rotate_event
// CHECK:         ascend.vadds
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.loop_end
ascend.kernel @toofar attributes {block_dim = 1 : i64, num_args = 1 : i64} {
  ascend.loop_begin count=16
  ascend.loop_offset arg=0, stride=256
  ascend.loop_rotate space=5, base=0, size=256, copies=7, step=1
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=4096, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.loop_end
}

// block_if regions: a barrier first thing inside each (none in the first: nothing precedes it),
// pairs within a region, and one barrier after the run of regions.
// CHECK-LABEL: ascend.kernel @blocks
// CHECK-NEXT:    ascend.block_offset
// CHECK-NEXT:    ascend.block_if lo=0, hi=2
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.block_endif
// CHECK-NEXT:    ascend.block_if lo=2, hi=3
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=5, event=0
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.block_endif
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:    ascend.vdup
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
ascend.kernel @blocks attributes {block_dim = 3 : i64, num_args = 2 : i64} {
  ascend.block_offset arg=0, stride=256
  ascend.block_if lo=0, hi=2
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.block_endif
  ascend.block_if lo=2, hi=3
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=128, src_stride=0, dst_stride=0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=128, src_stride=0, dst_stride=0
  ascend.block_endif
  ascend.vdup dtype=0, dst=0, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
}

// Nested loops: no loop is a fence. The outer body's copy hands over to the inner loop's vadds by a
// flag waited before the inner loop_begin; the inner loop's loop-carried WAR (MTE3 -> V, one id,
// d = 1 = its copies) is pre-set before the outer loop and drained after it: the flag one inner
// run leaves set serves the next run as its pre-set, so V is not stalled at every inner exit.
// CHECK-LABEL: ascend.kernel @nested
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=2
// CHECK:         ascend.loop_begin count=2
// CHECK-NOT:     event=2
// CHECK:         ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.loop_begin count=4
// CHECK-NEXT:    ascend.loop_offset
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=2
// CHECK-NEXT:    ascend.vadds
// CHECK-NEXT:    ascend.set_flag src_pipe=1, dst_pipe=5, event=2
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=5, event=2
// CHECK-NEXT:    ascend.copy_ub_to_gm
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=2
// CHECK-NEXT:    ascend.loop_end
// CHECK-NOT:     event=2
// CHECK:         ascend.loop_end
// CHECK-NOT:     pipe_barrier
// CHECK:         ascend.wait_flag src_pipe=5, dst_pipe=1, event=2
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=0
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
ascend.kernel @nested attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.loop_begin count=2
  ascend.loop_offset arg=0, stride=1024
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_begin count=4
  ascend.loop_offset arg=1, stride=256
  ascend.vadds dtype=0, dst=256, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_end
  ascend.loop_end
}

// A double-buffered cube K loop (L0A / L0B rotating): MTE1 -> M within an iteration, and the
// load of iteration k+2 overwrites what mmad k read (M -> MTE1, two rotating ids; MTE1 -> M rotates
// over two ids as well, since MTE1 may run an iteration ahead of the cube; it reuses id 0 of the
// pair before the loop, which MTE1 knows was waited: it waited for the mmad after it). With free
// barriers the pairs stay: a barrier before mmad would wait for the previous mmad, which the next
// loads do not have to. The loop is no fence: the first loads wait for the mmad before the loop by
// a flag (its WAR on L0A copy 0), the copy after it for the last mmad.
// CHECK-LABEL: ascend.kernel @cube_loop
// CHECK:         ascend.mmad
// CHECK-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=3, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=3, event=0
// CHECK-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=3, event=1
// CHECK-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=3, event=2
// CHECK-NEXT:    ascend.loop_begin count=5
// CHECK-NEXT:    ascend.loop_rotate space=2
// CHECK-NEXT:    ascend.loop_rotate space=3
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=2, dst_pipe=3, base=1, copies=2, step=1
// CHECK-NEXT:    ascend.loop_rotate_event src_pipe=3, dst_pipe=2, base=0, copies=2, step=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=3, event=1
// CHECK-NEXT:    ascend.load2d dst_space=1
// CHECK-NEXT:    ascend.load2d dst_space=2
// CHECK-NEXT:    ascend.set_flag src_pipe=3, dst_pipe=2, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=3, dst_pipe=2, event=0
// CHECK-NEXT:    ascend.mmad
// CHECK-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=3, event=1
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=3, event=1
// CHECK-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=3, event=2
// CHECK-NEXT:    ascend.set_flag src_pipe=2, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=2, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.copy_l0c_to_ub
// FREE-LABEL: ascend.kernel @cube_loop
// FREE:         ascend.loop_begin count=5
// FREE-NOT:     pipe_barrier
// FREE:         ascend.loop_end
ascend.kernel @cube_loop attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_l1 dst=0, src_arg=0, src=0, nburst=1, burst=1024, src_stride=0, dst_stride=0
  ascend.load2d dst_space=1, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
  ascend.load2d dst_space=2, dst=0, src=512, repeat=1, src_stride=512, dst_stride=512
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
  ascend.loop_begin count=5
  ascend.loop_rotate space=2, base=0, size=512, copies=2, step=1
  ascend.loop_rotate space=3, base=0, size=512, copies=2, step=1
  ascend.load2d dst_space=1, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
  ascend.load2d dst_space=2, dst=0, src=512, repeat=1, src_stride=512, dst_stride=512
  ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=0
  ascend.loop_end
  ascend.copy_l0c_to_ub dtype=0, dst=0, src=0, n1=1, m=16, src_m=16
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=512, src_stride=0, dst_stride=0
}

// Hand-over at a loop boundary (no fence): the load before the loop reaches the loop's vadds by a
// flag waited before loop_begin, and the vadds after the loop (which overwrites what the loop's
// stores read) by a flag set after loop_end: no pipe_barrier until the kernel's end.
// CHECK-LABEL: ascend.kernel @handover
// CHECK-NEXT:    ascend.copy_gm_to_ub
// CHECK-NEXT:    ascend.set_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=0
// CHECK-NOT:     pipe_barrier
// CHECK:         ascend.loop_begin count=4
// CHECK-NOT:     pipe_barrier
// CHECK:         ascend.loop_end
// CHECK-NEXT:    ascend.wait_flag src_pipe=5, dst_pipe=1, event=1
// CHECK-NEXT:    ascend.set_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NOT:     pipe_barrier
// CHECK:         ascend.wait_flag src_pipe=5, dst_pipe=1, event=0
// CHECK-NEXT:    ascend.vadds dtype=0, dst=256, src0=512
// CHECK-NEXT:    ascend.pipe_barrier pipe=6
// CHECK-NEXT:  }
ascend.kernel @handover attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_begin count=4
  ascend.loop_offset arg=1, stride=256
  ascend.vadds dtype=0, dst=256, src0=0, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_end
  ascend.copy_gm_to_ub dst=512, src_arg=0, src=256, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=256, src0=512, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
}

// Must not hoist: the inner loop's RAW (load k-1 -> vadds k) rotates over distance + 1 ids, so the
// flags one run leaves set depend on its trip count: its pre-set and drain stay around the inner
// loop, inside the outer body (the WAR back, over exactly its distance, is hoisted).
// CHECK-LABEL: ascend.kernel @nested_forward
// CHECK:         ascend.loop_begin count=2
// CHECK:         ascend.set_flag src_pipe=4, dst_pipe=1, event=3
// CHECK-NEXT:    ascend.loop_begin count=8
// CHECK:         ascend.loop_end
// CHECK-NEXT:    ascend.wait_flag src_pipe=1, dst_pipe=4, event=3
// CHECK-NEXT:    ascend.wait_flag src_pipe=4, dst_pipe=1, event=3
// CHECK:         ascend.loop_end
// CHECK-NOT:     event=3
// CHECK:       }
ascend.kernel @nested_forward attributes {block_dim = 1 : i64, num_args = 2 : i64} {
  ascend.loop_begin count=2
  ascend.loop_offset arg=0, stride=2048
  ascend.loop_begin count=8
  ascend.loop_offset arg=0, stride=256
  ascend.loop_rotate space=5, base=0, size=256, copies=2, step=1
  ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.vadds dtype=0, dst=4096, src0=256, src1=0, repeat=1, mask=128, dst_blk=1, src0_blk=1, src1_blk=1, dst_rep=8, src0_rep=8, src1_rep=8, scalar=1.0
  ascend.loop_end
  ascend.copy_ub_to_gm dst_arg=1, dst=0, src=4096, nburst=1, burst=256, src_stride=0, dst_stride=0
  ascend.loop_end
}
