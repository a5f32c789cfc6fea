// RUN: cann-opt %s | cann-opt | filecheck %s

// CHECK: %0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 2, 2>, coords = array<i64: 1, 0>, extent = array<i64: 9, 8>, need = array<i64: 4, 9, 0, 5>} : tensor<1x3x4x4xf32> -> tensor<1x3x5x5xf32>
%x = "test.op"() : () -> tensor<1x3x4x4xf32>
%0 = graph.halo_exchange %x {id = 0 : i64, grid = array<i64: 2, 2>, coords = array<i64: 1, 0>, extent = array<i64: 9, 8>, need = array<i64: 4, 9, 0, 5>} : tensor<1x3x4x4xf32> -> tensor<1x3x5x5xf32>
