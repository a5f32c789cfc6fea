// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 2, \"n_blocks\": 3, \"m\": 32}}"},convert-tile-to-ascend' | filecheck %s --check-prefix=GRID
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 1, \"n_blocks\": 1, \"k\": 64, \"step_k\": 2}}"}' | filecheck %s --check-prefix=CHUNK
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 1, \"n_blocks\": 1, \"m\": 16, \"n\": 16}}"},convert-tile-to-ascend' | filecheck %s --check-prefix=ROLL
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"m_blocks\": 8, \"n_blocks\": 8}}"}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 1, \"n_blocks\": 1, \"m\": 112, \"n\": 32, \"k\": 64, \"step_k\": 2, \"a_panel\": 1, \"skew\": 0}}"}' | filecheck %s --check-prefix=PANEL
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 1, \"n_blocks\": 1, \"m\": 112, \"n\": 32, \"k\": 64, \"step_k\": 2, \"a_panel\": 1, \"skew\": 1}}"}' | filecheck %s --check-prefix=SKEW
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"m_blocks\": 1, \"n_blocks\": 1, \"m\": 112, \"n\": 32, \"k\": 64, \"step_k\": 2, \"a_panel\": 1, \"skew\": 4}}"}' 2>&1 | filecheck %s --check-prefix=ERRSKEW
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"m_blocks\": 1, \"n_blocks\": 1, \"m\": 112, \"n\": 32, \"k\": 64, \"step_k\": 2, \"a_panel\": 0}}"}' | filecheck %s --check-prefix=NOPANEL
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"a_panel\": 2}}"}' 2>&1 | filecheck %s --check-prefix=ERRPANEL
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s --check-prefix=NOBIAS
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 tiling="{\"matmul_0\": {\"k_blocks\": 2, \"m_blocks\": 7, \"n_blocks\": 2}}"},convert-tile-to-ascend' | filecheck %s --check-prefix=KSPLIT
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16},convert-tile-to-ascend' | filecheck %s --check-prefix=NOKSPLIT
// RUN: not cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"k_blocks\": 20}}"}' 2>&1 | filecheck %s --check-prefix=ERRKSPLIT

// The GEMM kernel's 2-D split (cann/lowering/gemm.py): a 100 x 300 by 300 x 90 MatMul.
// Default: the plan's grid of 7 x 3 core blocks of 16 x 32 (the last block row 4 rows, the last
// block column 26 columns); the N offset of weight, bias and output is a block_offset_mod over
// the 3 cores of a block row, the M offset in each block row's code.

// CHECK:      func.func @matmul_0({{.*}}) attributes {tile.kernel, tile.block_dim = 21 : i64, tile.tiling = {a_panel = 0 : i64, block_dim = 21 : i64, k = 304 : i64, m = 16 : i64, m_blocks = 7 : i64, n = 32 : i64, n_blocks = 3 : i64, sm = 16 : i64, sn = 32 : i64, step_k = 1 : i64}}
// CHECK-NEXT:   tile.block_offset_mod %1 {stride = 512, modulo = 3}
// CHECK-NEXT:   tile.block_offset_mod %2 {stride = 256, modulo = 3}
// CHECK-NEXT:   tile.block_offset_mod %3 {stride = 32, modulo = 3}
// CHECK:        tile.block_if {lo = 0 : i64, hi = 3 : i64}
// CHECK-NEXT:   tile.block_if {lo = 0 : i64, hi = 2 : i64}
// CHECK-NEXT:   tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 0, dst_offset = 0, rows = 16, cols = 300, src_row_stride = 300}
// CHECK:        tile.block_if {lo = 18 : i64, hi = 21 : i64}
// CHECK:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 28800, dst_offset = 0, rows = 4, cols = 300, src_row_stride = 300}

// Pinned 2 x 3 and 32-row tiles: blocks of 64 x 32 in two 32 x 32 L0C tiles, unrolled (few tiles: a hardware loop's
// end is a barrier of every pipe, so a tile's epilogue would not overlap the next tile's loads);
// the ND output leaves in one burst per row (26 columns in the last block).
// GRID:       ascend.kernel @matmul_0 attributes {block_dim = 6 : i64, {{.*}}m_blocks = 2 : i64, n = 32 : i64, n_blocks = 3 : i64, sm = 64 : i64, sn = 32 : i64
// GRID-NEXT:    ascend.block_offset_mod arg=1, stride=1024, modulo=3
// GRID-NEXT:    ascend.block_offset_mod arg=2, stride=512, modulo=3
// GRID-NEXT:    ascend.block_offset_mod arg=3, stride=64, modulo=3
// GRID-NEXT:    ascend.block_if lo=0, hi=3
// GRID-NEXT:    ascend.block_if lo=0, hi=2
// GRID-NEXT:    ascend.copy_gm_to_l1_nd2nz dtype=0, dst={{[0-9]+}}, src_arg=0, src=0, rows=32, cols=300, src_row_stride=600
// GRID-NOT:     ascend.loop_begin
// GRID:         ascend.copy_ub_to_gm dst_arg=3, dst=0, src={{[0-9]+}}, nburst=32, burst=64, src_stride=64, dst_stride=180
// GRID-NEXT:    ascend.copy_gm_to_l1_nd2nz dtype=0, dst={{[0-9]+}}, src_arg=0, src=19200, rows=32, cols=300, src_row_stride=600
// GRID:         ascend.copy_ub_to_gm dst_arg=3, dst=5760, src={{[0-9]+}}, nburst=32, burst=64, src_stride=64, dst_stride=180
// GRID:         ascend.block_if lo=2, hi=3
// GRID:         ascend.copy_ub_to_gm dst_arg=3, dst=0, src={{[0-9]+}}, nburst=32, burst=52, src_stride=64, dst_stride=180
// GRID:         ascend.block_if lo=3, hi=6

// Pinned one core, 16 x 16 tiles: 7 x 6 tiles, more than UNROLL_TILES, so hardware loops: the tile
// rows (moving A and Y by 16 rows; the last, 4-row tile row apart) and in each the N tiles after
// the first (which loads the A panel: chosen here), moving B, the bias and Y by 16 columns, the
// last tile's burst clamped to its 6 columns.
// ROLL:       ascend.kernel @matmul_0 attributes {{{.*}}a_panel = 1 : i64, block_dim = 1 : i64, k = 304 : i64, m = 16 : i64, m_blocks = 1 : i64, n = 16 : i64
// ROLL-NEXT:    ascend.loop_begin count=6
// ROLL-NEXT:    ascend.loop_offset arg=0, stride=9600
// ROLL-NEXT:    ascend.loop_offset arg=3, stride=2880
// ROLL:         ascend.loop_begin count=5
// ROLL-NEXT:    ascend.loop_offset arg=1, stride=512
// ROLL-NOT:     ascend.copy_gm_to_l1_nd2nz
// ROLL:         ascend.loop_clamp field_no=4, step=-12, offset=36, lo=-12, hi=0, up=0
// ROLL-NEXT:    ascend.copy_ub_to_gm dst_arg=3, dst=32, src={{[0-9]+}}, nburst=16, burst=32, src_stride=32, dst_stride=180
// ROLL-NEXT:    ascend.loop_end
// ROLL-NEXT:    ascend.loop_end
// ROLL-NEXT:    ascend.copy_gm_to_l1_nd2nz dtype=0, dst={{[0-9]+}}, src_arg=0, src=57600, rows=4, cols=300, src_row_stride=600

// Pinned k = 64, step_k = 2: K (304) in L1 chunks of 128 (two cube steps each, the first mmad
// initializing L0C), the last chunk 48 wide.
// CHUNK:      func.func @matmul_0({{.*}}tile.block_dim = 1 : i64
// CHUNK:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 0, dst_offset = 0, rows = 100, cols = 128, src_row_stride = 300}
// CHUNK:        tile.mmad {{.*}}m = 112, k = 64, n = 96, init = 1}
// CHUNK:        tile.mmad {{.*}}m = 112, k = 64, n = 96, init = 0}
// CHUNK:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 128, dst_offset = 0, rows = 100, cols = 128, src_row_stride = 300}
// CHUNK:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 256, dst_offset = 0, rows = 100, cols = 44, src_row_stride = 300}
// CHUNK:        tile.mmad {{.*}}m = 112, k = 48, n = 96, init = 0}
// CHUNK-NOT:    tile.mmad

// ERR:        error: Gemm: tiling m_blocks = 8 x n_blocks = 8 needs 64 cores, 32 available

// Pinned a_panel = 1 (three 112 x 32 L0C tiles along N, unrolled): the first tile loads A's whole K
// (three chunks, each at its own place in the L1 panel: dst_offset = K offset x 112 rows); the other
// two tiles load only B and read A from the panel.
// PANEL:      func.func @matmul_0({{.*}}tile.tiling = {a_panel = 1 : i64, block_dim = 1 : i64
// PANEL:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 0, dst_offset = 0, rows = 100, cols = 128, src_row_stride = 300}
// PANEL:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 128, dst_offset = 14336, rows = 100, cols = 128, src_row_stride = 300}
// PANEL:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 256, dst_offset = 28672, rows = 100, cols = 44, src_row_stride = 300}
// PANEL:        tile.copy %1, {{%[0-9]+}} {src_offset = 512,
// PANEL-NOT:    tile.copy_nd2nz
// PANEL:        func.func @trans_data_1

// Pinned skew = 1 (same tiles): the three N tiles share the K chunks in rounds, tile j running chunk
// c in round c + j, each in an accumulator of its own (three L0C buffers), its epilogue right after
// its last chunk: round 0 loads A chunk 0 and tile 0's B; round 1 A chunk 1, tile 0's B, then tile
// 1's first B columns (GM offset 2 x 256) initializing the second accumulator; tile 0's epilogue
// follows its third chunk in round 2, before tile 1's and tile 2's chunks of that round.
// SKEW:       func.func @matmul_0({{.*}}tile.tiling = {a_panel = 1 : i64, block_dim = 1 : i64, {{.*}}skew = 1 : i64
// SKEW:         [[C0:%[0-9]+]] = tile.alloc : memref<3584xf32, #tile<space l0c>>
// SKEW-NEXT:    [[C1:%[0-9]+]] = tile.alloc : memref<3584xf32, #tile<space l0c>>
// SKEW-NEXT:    [[C2:%[0-9]+]] = tile.alloc : memref<3584xf32, #tile<space l0c>>
// SKEW-NEXT:    tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 0, dst_offset = 0, rows = 100, cols = 128, src_row_stride = 300}
// SKEW-NEXT:    tile.copy %1, {{%[0-9]+}} {src_offset = 0,
// SKEW:         tile.mmad {{.*}}[[C0]] {{.*}}init = 1}
// SKEW:         tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 128, dst_offset = 14336,
// SKEW-NEXT:    tile.copy %1, {{%[0-9]+}} {src_offset = 12288,
// SKEW:         tile.mmad {{.*}}[[C0]] {{.*}}init = 0}
// SKEW:         tile.copy %1, {{%[0-9]+}} {src_offset = 512,
// SKEW:         tile.mmad {{.*}}[[C1]] {{.*}}init = 1}
// SKEW:         tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 256, dst_offset = 28672,
// SKEW:         tile.mmad {{.*}}[[C0]] {{.*}}k = 48, n = 32, init = 0}
// SKEW-NEXT:    tile.copy_l0c_to_ub [[C0]]
// SKEW:         tile.copy {{.*}}, %3 {src_offset = 0, dst_offset = 0,
// SKEW-NEXT:    tile.copy %1, {{%[0-9]+}} {src_offset = 12800,
// SKEW:         tile.mmad {{.*}}[[C1]] {{.*}}init = 0}
// SKEW:         tile.copy %1, {{%[0-9]+}} {src_offset = 1024,
// SKEW:         tile.mmad {{.*}}[[C2]] {{.*}}init = 1}
// SKEW:         tile.copy_l0c_to_ub [[C1]]
// SKEW:         tile.copy_l0c_to_ub [[C2]]
// SKEW-NOT:     tile.copy_nd2nz
// SKEW:         func.func @trans_data_1

// ERRSKEW:    error: Gemm: tiling skew = 4 with m = 112, n = 32, k = 64, step_k = 2, a_panel = 1 exceeds 3 (the A panel's N tiles, unrolled, their accumulators together in L0C)

// Pinned a_panel = 0: every tile reloads its A chunks into one chunk-sized L1 buffer.
// NOPANEL:      func.func @matmul_0({{.*}}tile.tiling = {a_panel = 0 : i64, block_dim = 1 : i64
// NOPANEL-COUNT-3: tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 0, dst_offset = 0, rows = 100, cols = 128, src_row_stride = 300}
// NOPANEL:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 128, dst_offset = 0, rows = 100, cols = 128, src_row_stride = 300}
// NOPANEL:        tile.copy_nd2nz %0, {{%[0-9]+}} {src_offset = 256, dst_offset = 0, rows = 100, cols = 44, src_row_stride = 300}
// NOPANEL-NOT:    tile.copy_nd2nz
// NOPANEL:        func.func @trans_data_1

// A MatMul has no bias: its epilogue neither loads a bias table nor adds one (only the ND moves).
// NOBIAS:       func.func @matmul_0(
// NOBIAS-NOT:     tile.copy %2
// NOBIAS:         tile.copy_l0c_to_ub
// NOBIAS-NOT:     op = "add"
// NOBIAS:         tile.vec {{.*}}op = "mov"
// NOBIAS-NOT:     op = "add"
// NOBIAS:         func.func @trans_data_1

// ERRPANEL:   error: Gemm: tiling a_panel = 2 must be 0 or 1

// Pinned k_blocks = 2 (a K split across cores): a memset launch zeroes Y first; then 2 x 7 x 2 = 28
// cores, cores 0..13 summing K columns 0..159 and cores 14..27 columns 160..303 (140 real ones: A
// from column 160, B from K fractal 10), each adding its partial sums to Y (copy_ub_to_gm_add,
// float16) instead of storing them; the N offset is still a block_offset_mod over the 2 cores of a
// block row.
// KSPLIT:      ascend.kernel @memset_0 attributes {block_dim = 32 : i64
// KSPLIT:        ascend.vdup dtype=0
// KSPLIT:        ascend.copy_ub_to_gm dst_arg=0
// KSPLIT:      ascend.kernel @matmul_0 attributes {block_dim = 28 : i64, {{.*}}k = 160 : i64, k_blocks = 2 : i64, {{.*}}m_blocks = 7 : i64, {{.*}}n_blocks = 2 : i64
// KSPLIT-NEXT:   ascend.block_offset_mod arg=1, stride=1536, modulo=2
// KSPLIT:        ascend.block_if lo=0, hi=1
// KSPLIT-NEXT:   ascend.copy_gm_to_l1_nd2nz dtype=0, dst={{[0-9]+}}, src_arg=0, src=0, rows=16, cols=160, src_row_stride=600
// KSPLIT:        ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=160, n=48, init=1
// KSPLIT-NOT:    ascend.copy_ub_to_gm dst_arg=3
// KSPLIT:        ascend.copy_ub_to_gm_add dst_arg=3, dst=0, src={{[0-9]+}}, nburst=16, burst=96, src_stride=96, dst_stride=180, dtype=0
// KSPLIT:        ascend.block_if lo=14, hi=15
// KSPLIT-NEXT:   ascend.copy_gm_to_l1_nd2nz dtype=0, dst={{[0-9]+}}, src_arg=0, src=320, rows=16, cols=140, src_row_stride=600
// KSPLIT-NEXT:   ascend.copy_gm_to_l1 dst=0, src_arg=1, src=30720, nburst=9,
// KSPLIT:        ascend.mmad dtype=0, dst=0, a=0, b=0, m=16, k=144, n=48, init=1
// KSPLIT:        ascend.copy_ub_to_gm_add dst_arg=3, dst=0,

// Unpinned: no K split (one K range per core, the output stored), no memset launch.
// NOKSPLIT-NOT:  memset
// NOKSPLIT-NOT:  copy_ub_to_gm_add
// NOKSPLIT:      ascend.kernel @matmul_0
// NOKSPLIT-NOT:  k_blocks
// NOKSPLIT:      ascend.copy_ub_to_gm dst_arg=3
// NOKSPLIT-NOT:  copy_ub_to_gm_add

// ERRKSPLIT: error: Gemm: tiling k_blocks = 20 exceeds the 19 K fractals of K = 300

builtin.module {
  func.func @main(%a: tensor<100x300xf32> {graph.name = "a"}) -> (tensor<100x90xf32> {graph.name = "y"}) {
    %w = graph.constant dense<1.000000e-02> : tensor<300x90xf32>
    %y = graph.matmul %a, %w : (tensor<100x300xf32>, tensor<300x90xf32>) -> tensor<100x90xf32>
    func.return %y : tensor<100x90xf32>
  }
}
