// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

// 9 rows over 2: 5 | 4; device (1, 0) holds 4 rows, not 5
%x = "test.op"() : () -> tensor<1x3x5x4xf32>
%0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 2, 2>, coords = array<i64: 1, 0>, extent = array<i64: 9, 8>, need = array<i64: 4, 9, 0, 5>} : tensor<1x3x5x4xf32> -> tensor<1x3x5x5xf32>
// CHECK: 'graph.halo_exchange' operand must be NxCx4x4 (the slice of device (1, 0)), got 1x3x5x4

// -----
%x = "test.op"() : () -> tensor<1x3x4x4xf32>
%0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 2, 2>, coords = array<i64: 2, 0>, extent = array<i64: 9, 8>, need = array<i64: 4, 9, 0, 5>} : tensor<1x3x4x4xf32> -> tensor<1x3x5x5xf32>
// CHECK: 'graph.halo_exchange' coords (2, 0) outside the 2x2 grid

// -----
%x = "test.op"() : () -> tensor<1x3x4x4xf32>
%0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 2, 2>, coords = array<i64: 1, 0>, extent = array<i64: 9, 8>, need = array<i64: 4, 10, 0, 5>} : tensor<1x3x4x4xf32> -> tensor<1x3x6x5xf32>
// CHECK: 'graph.halo_exchange' need rows [4, 10) x columns [0, 5) is empty or outside the 9x8 extent

// -----
%x = "test.op"() : () -> tensor<1x3x4x4xf32>
%0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 2, 2>, coords = array<i64: 1, 0>, extent = array<i64: 9, 8>, need = array<i64: 4, 9, 0, 5>} : tensor<1x3x4x4xf32> -> tensor<1x3x5x4xf32>
// CHECK: 'graph.halo_exchange' result must be 1x3x5x5 (the need block), got 1x3x5x4

// -----
// 12 columns over 4: 3 | 3 | 3 | 3; device (0, 0) may reach columns [0, 6) only
%x = "test.op"() : () -> tensor<1x3x4x3xf32>
%0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 1, 4>, coords = array<i64: 0, 0>, extent = array<i64: 4, 12>, need = array<i64: 0, 4, 0, 7>} : tensor<1x3x4x3xf32> -> tensor<1x3x4x7xf32>
// CHECK: 'graph.halo_exchange' need rows [0, 4) x columns [0, 7) reaches beyond the neighbouring slices (rows [0, 4) x columns [0, 6)): the halo is wider than a neighbour's slice; use a coarser grid or a smaller exchange depth
