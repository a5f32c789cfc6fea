// RUN: cann-opt %s | filecheck %s
// RUN: cann-opt %s --print-op-generic | cann-opt | filecheck %s

builtin.module {
  func.func @k(%x: memref<256xf16, #tile<space gm>>, %y: memref<256xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {chunk = 256 : i64}} {
    %ub = tile.alloc : memref<256xf16, #tile<space ub>>
    %l1 = tile.alloc : memref<256xf16, #tile<space l1>>
    %a = tile.alloc : memref<256xf16, #tile<space l0a>>
    %b = tile.alloc : memref<256xf16, #tile<space l0b>>
    %c = tile.alloc : memref<256xf32, #tile<space l0c>>
    %d = tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
    tile.copy %x, %ub {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
    tile.copy_nd2nz %x, %l1 {src_offset = 0, dst_offset = 0, rows = 1, cols = 16, src_row_stride = 16} : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space l1>>
    tile.load2d %l1, %b {src_offset = 0, dst_offset = 0, count = 1, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space l1>>, memref<256xf16, #tile<space l0b>>
    tile.img2col %l1, %a {src_offset = 0, dst_offset = 0, fm_c1 = 1, fm_h = 4, fm_w = 4, pad_t = 0, pad_b = 0, pad_l = 0, pad_r = 0, stride_h = 1, stride_w = 1, kernel_h = 1, kernel_w = 1, dil_h = 1, dil_w = 1, m_start = 0, m_count = 16, k_start = 0, k_count = 16, fm_c1_stride = 256} : memref<256xf16, #tile<space l1>>, memref<256xf16, #tile<space l0a>>
    tile.mmad %a, %b, %c {a_offset = 0, b_offset = 0, c_offset = 0, m = 16, k = 16, n = 16, init = 1} : memref<256xf16, #tile<space l0a>>, memref<256xf16, #tile<space l0b>>, memref<256xf32, #tile<space l0c>>
    tile.copy_l0c_to_ub %c, %ub {src_offset = 0, dst_offset = 0, n1 = 1, m = 16, src_m = 16} : memref<256xf32, #tile<space l0c>>, memref<256xf16, #tile<space ub>>
    tile.vec %ub, %ub, %ub {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 16, unit = 16, dst_stride = 16, src0_stride = 16, src1_stride = 0, scalar = 0.5, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
    tile.reduce %ub, %ub, %ub {dst_offset = 0, src_offset = 0, scratch_offset = 128, count = 100, op = "max"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
    tile.broadcast %ub, %ub {dst_offset = 128, src_offset = 0, count = 1} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
    tile.copy %ub, %y {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space gm>>
    func.return
  }
  func.func @main(%in: memref<1x256xf16, #tile<space gm>>) -> memref<256xf16, #tile<space gm>> {
    %w = tile.constant {format = "ND", value = dense<1.0> : tensor<256xf16>} : memref<256xf16, #tile<space gm>>
    %t = tile.gm_alloc {format = "ND", shape = array<i64: 256>} : memref<256xf16, #tile<space gm>>
    %v = tile.view %in {format = "ND", shape = array<i64: 256>} : memref<1x256xf16, #tile<space gm>> -> memref<256xf16, #tile<space gm>>
    tile.launch @k(%v, %t) : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space gm>>
    func.return %t : memref<256xf16, #tile<space gm>>
  }
}

// CHECK:      %{{.*}} = tile.alloc : memref<256xf16, #tile<space ub>>
// CHECK:      %{{.*}} = tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
// CHECK:      tile.copy %{{.*}}, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
// CHECK-NEXT: tile.copy_nd2nz {{.*}}rows = 1, cols = 16, src_row_stride = 16}
// CHECK-NEXT: tile.load2d {{.*}}count = 1,
// CHECK-NEXT: tile.img2col {{.*}}k_count = 16, fm_c1_stride = 256}
// CHECK-NEXT: tile.mmad {{.*}}init = 1}
// CHECK-NEXT: tile.copy_l0c_to_ub {{.*}}src_m = 16}
// CHECK-NEXT: tile.vec {{.*}}src1_stride = 0, scalar = 0.5, op = "add"}
// CHECK-NEXT: tile.reduce {{.*}}count = 100, op = "max"}
// CHECK-NEXT: tile.broadcast {{.*}}count = 1}
// CHECK:      tile.constant {format = "ND", value = dense<1.000000e+00> : tensor<256xf16>} : memref<256xf16, #tile<space gm>>
// CHECK-NEXT: tile.gm_alloc {format = "ND", shape = array<i64: 256>}
// CHECK-NEXT: tile.view %{{.*}} {format = "ND", shape = array<i64: 256>} : memref<1x256xf16, #tile<space gm>> -> memref<256xf16, #tile<space gm>>
// CHECK-NEXT: tile.launch @k(%{{.*}}, %{{.*}}) : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space gm>>
