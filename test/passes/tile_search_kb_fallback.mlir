// A tiling recorded from the shipped knowledge base (tile.kb_fallback) that the kernel refuses
// gives way to the default tiling: convert-graph-to-tile lowers the op as if nothing were recorded.
// RUN: cann-opt %s -p 'convert-graph-to-tile' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{tiling="{\"matmul_0\": {\"m_blocks\": 1}}"}' | filecheck %s --check-prefix=PIN
// tile-search-kb{shipped=true} reads the package's file (its digest first), a user's file on top.
// RUN: cann-opt %s -p 'tile-search-kb{shipped=true kb="%S/inputs/kb_gemm.json"}' | filecheck %s --check-prefix=BOTH
// Must not: shipped=false and no file record nothing.
// RUN: cann-opt %s -p 'tile-search-kb{shipped=false}' | filecheck %s --check-prefix=NONE

// CHECK:      func.func @matmul_0({{.*}}tile.tiling = {{{.*}}block_dim = {{[0-9]+}} : i64, k = {{[0-9]+}} : i64, m = {{(16|32)}} : i64,
// CHECK-NOT:  m = 24
// PIN:        func.func @matmul_0({{.*}}tile.tiling = {{{.*}}block_dim = {{[0-9]+}} : i64, {{.*}}m_blocks = 1 : i64
// BOTH:       builtin.module attributes {tile.knowledge_bases = ["shipped:{{[0-9a-f]+}}", "user:{{[0-9a-f]+}}"]}
// NONE-NOT:   tile.knowledge_bases

builtin.module {
  func.func @main(%0: tensor<32x64xf32> {graph.name = "a"}) -> (tensor<32x48xf32> {graph.name = "y"}) {
    %1 = graph.constant dense<1.000000e-01> : tensor<64x48xf32>
    %2 = graph.matmul %0, %1 {tile.tiling = {m = 24 : i64, m_blocks = 2 : i64}, tile.kb = "cann/kb/Ascend910.json", tile.kb_fallback} : (tensor<32x64xf32>, tensor<64x48xf32>) -> tensor<32x48xf32> loc("mm")
    func.return %2 : tensor<32x48xf32>
  }
}
