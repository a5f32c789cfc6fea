// RUN: cann-opt %s -p 'convert-graph-to-tile' | filecheck %s

// MatMul of two tensors with one batch: its output-column tiles (N = 300: two of 128 and a partial
// one of 44) are spread over the cores; each core moves B^T by 128 rows of K and Y by 128 columns;
// the partial tile runs on its own core (block_if 2..3) with 44 rows of B^T and 16 + 16 + 12
// column bursts. Several batches are still spread by batch (the second kernel).

// CHECK:      func.func @batch_matmul_0({{.*}}tile.block_dim = 3 : i64
// CHECK:        tile.block_offset %{{[0-9]+}} {stride = 8192}
// CHECK-NEXT:   tile.block_offset %{{[0-9]+}} {stride = 128}
// CHECK:        tile.block_if {lo = 0 : i64, hi = 2 : i64}
// CHECK:        tile.copy_nd2nz {{.*}}rows = 128, cols = 64, src_row_stride = 64}
// CHECK:        tile.block_endif
// CHECK-NEXT:   tile.block_if {lo = 2 : i64, hi = 3 : i64}
// CHECK:        tile.copy_nd2nz {{.*}}rows = 44, cols = 64, src_row_stride = 64}
// CHECK:        tile.copy {{.*}}nburst = 8, burst = 12, src_stride = 16, dst_stride = 300}
// CHECK:        tile.block_endif
// CHECK:      func.func @batch_matmul_1({{.*}}tile.block_dim = 2 : i64
// CHECK:        tile.block_offset %{{[0-9]+}} {stride = 512}
// CHECK-NEXT:   tile.block_offset %{{[0-9]+}} {stride = 2048}
// CHECK-NEXT:   tile.block_offset %{{[0-9]+}} {stride = 256}

builtin.module {
  func.func @main(%a: tensor<8x64xf32> {graph.name = "a"}, %b: tensor<64x300xf32> {graph.name = "b"}, %c: tensor<2x8x64xf32> {graph.name = "c"}, %d: tensor<2x64x32xf32> {graph.name = "d"}) -> (tensor<8x300xf32> {graph.name = "y"}, tensor<2x8x32xf32> {graph.name = "z"}) {
    %y = graph.matmul %a, %b : (tensor<8x64xf32>, tensor<64x300xf32>) -> tensor<8x300xf32>
    %z = graph.matmul %c, %d : (tensor<2x8x64xf32>, tensor<2x64x32xf32>) -> tensor<2x8x32xf32>
    func.return %y, %z : tensor<8x300xf32>, tensor<2x8x32xf32>
  }
}
