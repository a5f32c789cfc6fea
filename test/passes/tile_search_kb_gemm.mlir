// tile-search-kb on GEMMs: a MatMul by a constant and a Gemm (transB=1) get the tiling of their
// signature's entry; convert-graph-to-tile applies it to the matmul_0 / gemm_0 kernels.
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb_gemm.json"}' | filecheck %s
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb_gemm.json"},convert-graph-to-tile' | filecheck %s --check-prefix=TILE
// A kernel-name pin wins over the entry.
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb_gemm.json"},convert-graph-to-tile{tiling="{\"matmul_0\": {\"n_blocks\": 1}}"}' | filecheck %s --check-prefix=PIN
// Must not: a MatMul of two tensors has no signature (nothing recorded on it).
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb_gemm.json"}' | filecheck %s --check-prefix=TWO
// An entry applies to compiles of the core count it names (aicore_num; absent: all of the SoC's).
// RUN: cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb_gemm.json" aicore_num=16}' | filecheck %s --check-prefix=CORES
// A user's entry the kernel refuses (m = 24 is not a multiple of 16) is an error naming the file and the signature.
// RUN: not cann-opt %s -p 'tile-search-kb{kb="%S/inputs/kb_gemm_bad.json"},convert-graph-to-tile' 2>&1 | filecheck %s --check-prefix=BAD

// CHECK:      builtin.module attributes {tile.knowledge_bases = ["user:{{[0-9a-f]+}}"]}
// CHECK:      graph.matmul %0, %2 {tile.tiling = {m_blocks = 2 : i64, n_blocks = 3 : i64, step_k = 1 : i64}, tile.kb = "{{.*}}kb_gemm.json"
// CHECK:      graph.gemm %0, %3 {tile.tiling = {m = 32 : i64, m_blocks = 1 : i64, n = 16 : i64, n_blocks = 3 : i64}, tile.kb = "{{.*}}kb_gemm.json"
// TILE:       func.func @matmul_0({{.*}}tile.tiling = {{{.*}}block_dim = 6 : i64, {{.*}}m_blocks = 2 : i64, n = 16 : i64, n_blocks = 3 : i64, {{.*}}step_k = 1 : i64}
// TILE:       func.func @gemm_0({{.*}}tile.tiling = {{{.*}}block_dim = 3 : i64, k = {{[0-9]+}} : i64, m = 32 : i64, m_blocks = 1 : i64, n = 16 : i64, n_blocks = 3 : i64,
// PIN:        func.func @matmul_0({{.*}}tile.tiling = {{{.*}}block_dim = 2 : i64, {{.*}}m_blocks = 2 : i64, {{.*}}n_blocks = 1 : i64
// TWO:        graph.matmul %0, %1 : (tensor<32x64xf32>, tensor<64x16xf32>)
// CORES:      graph.matmul %0, %2 {tile.tiling = {m_blocks = 1 : i64, n_blocks = 3 : i64, step_k = 2 : i64}
// CORES-NOT:  graph.gemm {{.*}}tile.tiling
// BAD:        error: {{.*}}kb_gemm_bad.json: MatMul entry 'a=32x64 b=64x48 dtype=f32': tiling {'m': 24, 'm_blocks': 2, 'n_blocks': 3} refused by the kernel (mm: Gemm: tiling m = 24 must be a multiple of 16)

builtin.module {
  func.func @main(%0: tensor<32x64xf32> {graph.name = "a"}, %3: tensor<64x16xf32> {graph.name = "b"}) -> (tensor<32x48xf32> {graph.name = "y"}, tensor<32x48xf32> {graph.name = "z"}, tensor<32x16xf32> {graph.name = "w"}) {
    %1 = graph.constant dense<1.000000e-01> : tensor<64x48xf32>
    %2 = graph.constant dense<2.000000e-01> : tensor<48x64xf32>
    %4 = graph.matmul %0, %1 : (tensor<32x64xf32>, tensor<64x48xf32>) -> tensor<32x48xf32> loc("mm")
    %5 = graph.gemm %0, %2 {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<32x64xf32>, tensor<48x64xf32>) -> tensor<32x48xf32> loc("gm")
    %6 = graph.matmul %0, %3 : (tensor<32x64xf32>, tensor<64x16xf32>) -> tensor<32x16xf32> loc("mm2")
    func.return %4, %5, %6 : tensor<32x48xf32>, tensor<32x48xf32>, tensor<32x16xf32>
  }
}
