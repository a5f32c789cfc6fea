// Input of conv_tiles.mlir's C1 checks: 32 input channels (two C1 blocks).
builtin.module {
  func.func @main(%x: tensor<1x32x10x14xf32> {graph.name = "x"}) -> (tensor<1x16x10x14xf32> {graph.name = "y"}) {
    %w = graph.constant dense<5.000000e-01> : tensor<16x32x3x3xf32>
    %b = graph.constant dense<1.000000e-01> : tensor<16xf32>
    %y = graph.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x32x10x14xf32>, tensor<16x32x3x3xf32>, tensor<16xf32>) -> tensor<1x16x10x14xf32>
    func.return %y : tensor<1x16x10x14xf32>
  }
}
