// RUN: not cann-opt %s -p 'train-step{loss=mse}' 2>&1 | filecheck %s

// An op on the path from a parameter to the loss without a gradient rule is one error naming its node.
// CHECK: error: the_pow: no gradient rule for graph.pow
builtin.module {
  func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x3xf32> {graph.name = "y"}) {
    %w = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32> loc("w")
    %y = graph.pow %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("the_pow")
    func.return %y : tensor<2x3xf32>
  }
}
