// RUN: cann-opt %S/convert_graph_to_tile.mlir -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16},convert-tile-to-ascend' | filecheck %s
// RUN: cann-opt %S/convert_graph_to_tile.mlir -p 'convert-graph-to-tile,convert-tile-to-ascend,ascend-insert-sync' | filecheck %s --check-prefix=SYNC

// Tile ops become instructions with byte addresses; buffers are placed at aligned offsets.
// CHECK:      ascend.kernel @trans_data_0 attributes {block_dim = 1 : i64, num_args = 2 : i64
// CHECK-NEXT:   ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=3, burst=64, src_stride=64, dst_stride=64
// CHECK-NEXT:   ascend.vconv_f322f16 {{.*}}repeat=1, mask=48
// CHECK-NEXT:   ascend.vdup dtype=0, dst=1120, {{.*}}repeat=1, mask=128
// CHECK-NEXT:   ascend.vdup dtype=0, dst=1376, {{.*}}repeat=1, mask=80
// The 16 channel rows (32 B apart) x 16 positions transpose into [16 positions][16 lanes].
// CHECK-NEXT:   ascend.vtranspose dtype=0, dst=1536, src=1024, repeat=1, dst_rep=16, src_rep=1, dst_row=1, src_row=1
// CHECK-NEXT:   ascend.copy_ub_to_gm dst_arg=1, dst=0, src=1536, nburst=1, burst=512, src_stride=512, dst_stride=512
// CHECK:      ascend.kernel @conv2d_0 attributes {block_dim = 1 : i64, num_args = 4 : i64
// CHECK:        ascend.copy_gm_to_l1 dst={{[0-9]+}}, src_arg=0, src=0, nburst=1, burst=512
// CHECK:        ascend.load2d dst_space=2, dst=0, src=0, repeat=1, src_stride=512, dst_stride=512
// CHECK:        ascend.img2col dtype=0, dst=0, src={{[0-9]+}}, fm_c1=1, fm_h=4, fm_w=4
// CHECK:        ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=16, n=16, init=1
// CHECK:        ascend.copy_l0c_to_ub dtype=0, dst={{[0-9]+}}, src=0, n1=1, m=16, src_m=16
// The bias block (16 channels: one 32 B block in float16) is broadcast with block and repeat strides of 0.
// CHECK:        ascend.vadd dtype=0, {{.*}}repeat=2, mask=128, dst_blk=1, src0_blk=1, src1_blk=0, dst_rep=8, src0_rep=8, src1_rep=0
// CHECK:        ascend.copy_ub_to_gm dst_arg=3, dst=0
// CHECK:      ascend.kernel @relu_0
// CHECK:        ascend.vrelu dtype=0, {{.*}}repeat=2, mask=128
// CHECK:      func.func @main
// CHECK:        tile.launch @conv2d_0

// -O0 synchronization: a PIPE_ALL barrier wherever the pipe changes, and at the end.
// SYNC:       ascend.kernel @relu_0
// SYNC-NEXT:    ascend.copy_gm_to_ub
// SYNC-NEXT:    ascend.pipe_barrier pipe=6
// SYNC-NEXT:    ascend.vrelu
// SYNC-NEXT:    ascend.pipe_barrier pipe=6
// SYNC-NEXT:    ascend.copy_ub_to_gm
// SYNC-NEXT:    ascend.pipe_barrier pipe=6
// SYNC-NEXT:  }
