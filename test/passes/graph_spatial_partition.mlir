// RUN: cann-opt %s --split-input-file -p 'graph-spatial-partition{grid=1x2}' | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'graph-spatial-partition{grid=2x1}' | filecheck %s --check-prefix=ROWS
// RUN: cann-opt %s --split-input-file -p 'graph-spatial-partition{grid=1x2 depth=2}' | filecheck %s --check-prefix=DEEP
// RUN: not cann-opt %s -p 'graph-spatial-partition{grid=2y2}' 2>&1 | filecheck %s --check-prefix=GRID
// RUN: not cann-opt %s -p 'graph-spatial-partition{grid=1x2 depth=0}' 2>&1 | filecheck %s --check-prefix=DEPTH

// GRID: error: graph-spatial-partition{grid}: '2y2': the device grid is ROWSxCOLUMNS with both at least 1, e.g. 2x2
// DEPTH: error: graph-spatial-partition{depth}: 0: window layers per exchange, at least 1

// Two 3x3 convs (pad 1) on 8 columns split 4 | 4: before each conv one exchange of one column, the conv's
// interior pad dropped (left device: pads top 1, left 1, bottom 1, right 0). With depth=2 one exchange of two
// columns before the first conv, which then computes one column more than its slice (redundantly).
// CHECK-LABEL: func.func @main_r0_c0(%0: tensor<1x2x8x4xf32> {graph.name = "x"}) -> (tensor<1x2x8x4xf32> {graph.name = "y"})
// CHECK:         %[[H:.*]] = graph.halo_exchange %0 {id = 0 : i64, grid = array<i64: 1, 2>, coords = array<i64: 0, 0>, extent = array<i64: 8, 8>, need = array<i64: 0, 8, 0, 5>} : tensor<1x2x8x4xf32> -> tensor<1x2x8x5xf32>
// CHECK:         %[[C:.*]] = graph.conv2d %[[H]], %{{.*}} {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 0>, {{.*}}} : (tensor<1x2x8x5xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x8x4xf32>
// CHECK:         %[[R:.*]] = graph.relu %[[C]] : tensor<1x2x8x4xf32>
// CHECK:         %[[H2:.*]] = graph.halo_exchange %[[R]] {id = 1 : i64, {{.*}} need = array<i64: 0, 8, 0, 5>}
// CHECK:         graph.conv2d %[[H2]], %{{.*}} pads = array<i64: 1, 1, 1, 0>
// CHECK-LABEL: func.func @main_r0_c1
// CHECK:         graph.halo_exchange %0 {id = 0 : i64, grid = array<i64: 1, 2>, coords = array<i64: 0, 1>, extent = array<i64: 8, 8>, need = array<i64: 0, 8, 3, 8>}
// CHECK:         graph.conv2d {{.*}} pads = array<i64: 1, 0, 1, 1>
// CHECK:         graph.halo_exchange {{.*}}{id = 1 : i64
// CHECK-NOT:     graph.halo_exchange
// CHECK:         func.return

// Rows split 4 | 4 (grid 2x1): the exchanges carry rows.
// ROWS-LABEL: func.func @main_r0_c0(%0: tensor<1x2x4x8xf32> {graph.name = "x"})
// ROWS:         graph.halo_exchange %0 {id = 0 : i64, grid = array<i64: 2, 1>, coords = array<i64: 0, 0>, extent = array<i64: 8, 8>, need = array<i64: 0, 5, 0, 8>}
// ROWS:         graph.conv2d {{.*}} pads = array<i64: 1, 1, 0, 1>
// ROWS-LABEL: func.func @main_r1_c0

// DEEP-LABEL: func.func @main_r0_c0
// DEEP:         graph.halo_exchange %0 {id = 0 : i64, grid = array<i64: 1, 2>, coords = array<i64: 0, 0>, extent = array<i64: 8, 8>, need = array<i64: 0, 8, 0, 6>} : tensor<1x2x8x4xf32> -> tensor<1x2x8x6xf32>
// DEEP:         graph.conv2d {{.*}} pads = array<i64: 1, 1, 1, 0>{{.*}} -> tensor<1x2x8x5xf32>
// DEEP-NOT:     graph.halo_exchange
// DEEP:         graph.conv2d {{.*}} pads = array<i64: 1, 1, 1, 0>{{.*}} -> tensor<1x2x8x4xf32>
// DEEP-LABEL: func.func @main_r0_c1
builtin.module {
  func.func @main(%x: tensor<1x2x8x8xf32> {graph.name = "x"}) -> (tensor<1x2x8x8xf32> {graph.name = "y"}) {
    %w = graph.constant dense<1.0> : tensor<2x2x3x3xf32>
    %c1 = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x8x8xf32>
    %r1 = graph.relu %c1 : tensor<1x2x8x8xf32>
    %c2 = graph.conv2d %r1, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x8x8xf32>
    func.return %c2 : tensor<1x2x8x8xf32>
  }
}

// -----

// Must not: a 1x1 conv, BatchNorm-like elementwise ops, an aligned 2x2/2 max pool and a skip Add read nothing
// beyond the device's block: no exchange on any device.
// CHECK-LABEL: func.func @main_r0_c0(%0: tensor<1x2x8x4xf32> {graph.name = "x"}) -> (tensor<1x2x4x2xf32> {graph.name = "y"})
// CHECK-NOT:     graph.halo_exchange
// CHECK:         graph.max_pool {{.*}} : tensor<1x2x8x4xf32> -> tensor<1x2x4x2xf32>
// CHECK-LABEL: func.func @main_r0_c1
// CHECK-NOT:     graph.halo_exchange
// CHECK:         func.return
// ROWS-LABEL: func.func @main_r0_c0
// ROWS-NOT:     graph.halo_exchange
// ROWS:         func.return
// DEEP-LABEL: func.func @main_r0_c0
// DEEP-NOT:     graph.halo_exchange
// DEEP:         func.return
builtin.module {
  func.func @main(%x: tensor<1x2x8x8xf32> {graph.name = "x"}) -> (tensor<1x2x4x4xf32> {graph.name = "y"}) {
    %w = graph.constant dense<1.0> : tensor<2x2x1x1xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x2x8x8xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x8x8xf32>
    %r = graph.relu %c : tensor<1x2x8x8xf32>
    %s = graph.add %r, %x : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
    %p = graph.max_pool %s {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
    func.return %p : tensor<1x2x4x4xf32>
  }
}

// -----

// Uneven split (7 columns: 4 | 3) and a ConvTranspose (k4, s2, pads 1: x2 upsampling, 14 output columns, 7 | 7):
// input column i feeds outputs [2i-1, 2i+2], so the left device's outputs [0, 7) read inputs [0, 4) (local pads
// left 1, right 2) and the right device's [7, 14) read [3, 7) (one column received; local pads left 2, right 1).
// CHECK-LABEL: func.func @main_r0_c0(%0: tensor<1x1x2x4xf32> {graph.name = "x"}) -> (tensor<1x1x4x7xf32> {graph.name = "y"})
// CHECK:         graph.halo_exchange %0 {{.*}} need = array<i64: 0, 2, 0, 4>} : tensor<1x1x2x4xf32> -> tensor<1x1x2x4xf32>
// CHECK:         graph.conv_transpose {{.*}} pads = array<i64: 1, 1, 1, 2>{{.*}} -> tensor<1x1x4x7xf32>
// CHECK-LABEL: func.func @main_r0_c1(%0: tensor<1x1x2x3xf32> {graph.name = "x"}) -> (tensor<1x1x4x7xf32> {graph.name = "y"})
// CHECK:         graph.halo_exchange %0 {{.*}} need = array<i64: 0, 2, 3, 7>} : tensor<1x1x2x3xf32> -> tensor<1x1x2x4xf32>
// CHECK:         graph.conv_transpose {{.*}} pads = array<i64: 1, 2, 1, 1>{{.*}} -> tensor<1x1x4x7xf32>
// ROWS-LABEL: func.func @main_r0_c0
// ROWS-LABEL: func.func @main_r1_c0
// DEEP-LABEL: func.func @main_r0_c0
builtin.module {
  func.func @main(%x: tensor<1x1x2x7xf32> {graph.name = "x"}) -> (tensor<1x1x4x14xf32> {graph.name = "y"}) {
    %w = graph.constant dense<1.0> : tensor<1x1x4x4xf32>
    %u = graph.conv_transpose %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x1x2x7xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x14xf32>
    func.return %u : tensor<1x1x4x14xf32>
  }
}
