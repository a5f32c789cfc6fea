// Text written to stdout after a pass reads back (issue 10, item 14): a large constant becomes a
// `dense_resource` handle keyed by its name, and its blob is written into the text's
// `dialect_resources` section (no sidecar file exists for stdout); the module gets no
// `graph.weights`. Reading that text back gives the original values.
// RUN: cann-opt %s -p graph-fold-transposes | filecheck %s
// RUN: cann-opt %s -p graph-fold-transposes | cann-opt -p cse | filecheck %s
// RUN: cann-opt %s -p graph-fold-transposes | cann-opt -p cse --print-op-generic | filecheck %s --check-prefix=VALUES
// With -o the blob goes to the sidecar instead, under the same key.
// RUN: cann-opt %s -p graph-fold-transposes -o %t.mlir && filecheck %s --check-prefix=FILE < %t.mlir
// RUN: cann-opt %t.mlir -p cse | cann-opt --print-op-generic -p cse | filecheck %s --check-prefix=VALUES

// CHECK-NOT:   graph.weights
// CHECK:       graph.constant dense_resource<w_0> : tensor<2x16xf32> loc("w:0")
// CHECK:       {-#
// CHECK-NEXT:    dialect_resources: {
// CHECK-NEXT:      builtin: {
// CHECK-NEXT:        w_0: "0x040000000000803f0000004000004040
// CHECK:       #-}

// FILE:        builtin.module attributes {graph.weights = "weights_stdout.mlir.tmp.mlir.npz"}
// FILE:        graph.constant dense_resource<w_0> : tensor<2x16xf32> loc("w:0")
// FILE-NOT:    dialect_resources

// VALUES:      dense<[[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00, 9.000000e+00, 1.000000e+01, 1.100000e+01, 1.200000e+01, 1.300000e+01, 1.400000e+01, 1.500000e+01, 1.600000e+01], [1.700000e+01, {{.*}} 3.200000e+01]]>
builtin.module {
  func.func @main(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
    %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0], [17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]]> : tensor<2x16xf32> loc("w:0")
    %y = graph.add %x, %w : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
    func.return %y : tensor<2x16xf32>
  }
}
