builtin.module {
  func.func @between_layers(%x: tensor<1x4x4x3xf32>) -> tensor<1x2x4x4xf32> {
    %w1 = graph.constant dense<1.000000e+00> : tensor<2x3x1x1xf32>
    %w2 = graph.constant dense<1.000000e+00> : tensor<2x2x1x1xf32>
    %0 = graph.transpose %x {perm = array<i64: 0, 3, 1, 2>} : tensor<1x4x4x3xf32> -> tensor<1x3x4x4xf32>
    %1 = graph.conv2d %0, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
    %2 = graph.constant dense<[[[[5.000000e-01]], [[2.000000e+00]]]]> : tensor<1x2x1x1xf32>
    %3 = graph.mul %1, %2 : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
    %4 = graph.sigmoid %3 : tensor<1x2x4x4xf32>
    %5 = graph.mul %3, %4 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %6 = graph.conv2d %5, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
    func.return %6 : tensor<1x2x4x4xf32>
  }
  func.func @compose_and_reduce(%x: tensor<1x2x4x4xf32>, %y: tensor<2x3x4xf32>) -> (tensor<1x2xf32>, tensor<4x2x3xf32>) {
    %0 = graph.reduce %x {kind = "mean", axes = array<i64: 2, 3>, keepdims = 0 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2xf32>
    %1 = graph.transpose %y {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
    func.return %0, %1 : tensor<1x2xf32>, tensor<4x2x3xf32>
  }
  func.func @no_fold(%x: tensor<1x2x4x4xf32>, %y: tensor<1x4x4x2xf32>, %z: tensor<2x3xf32>) -> (tensor<1x4x4x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
    %0 = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : tensor<1x2x4x4xf32> -> tensor<1x4x4x2xf32>
    %1 = graph.add %0, %y : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
    %2 = graph.transpose %z {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
    %3 = graph.relu %2 : tensor<3x2xf32>
    func.return %1, %2, %3 : tensor<1x4x4x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
  }
}
