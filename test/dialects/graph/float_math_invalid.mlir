// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.hardmax %x {axis = 2 : i64} : tensor<2x3xf32>
// CHECK: 'graph.hardmax' axis 2 out of range for rank 2

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.det %x : tensor<2x3xf32> -> tensor<f32>
// CHECK: 'graph.det' expects [..., N, N] matrices, got shape [2, 3]
