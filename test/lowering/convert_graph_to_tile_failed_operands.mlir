// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' 2>&1 | filecheck %s

// A refused op (int64 Mod) is the only diagnostic: the ops downstream of it, including a
// graph.fused group that reads the failed value inside its region, add no "operand has no value".

// CHECK:     error: mod: Mod of int64 tensors: the vector unit divides in floating point, exact only for 8- and 16-bit integers
// CHECK-NOT: error

builtin.module {
  func.func @main(%0: tensor<4x8xi64> {graph.name = "x"}, %1: tensor<4x8xi64> {graph.name = "y"}, %2: tensor<4x8xf32> {graph.name = "f"}) -> (tensor<4x8xf32> {graph.name = "d"}) {
    %3 = graph.mod %0, %1 {fmod = 0 : i64} : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi64> loc("mod")
    %4 = graph.cast %3 : tensor<4x8xi64> -> tensor<4x8xf32> loc("cast")
    %5 = graph.fused "elementwise" : tensor<4x8xf32> {
      %6 = graph.relu %4 : tensor<4x8xf32> loc("relu")
      %7 = graph.mul %6, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("mul")
      graph.yield %7 : tensor<4x8xf32>
    }
    func.return %5 : tensor<4x8xf32>
  }
}
