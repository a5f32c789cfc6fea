// The train-step pass's `ranks` option (data parallelism, docs/training.md): the program of one shard.
// RUN: cann-opt %s -p 'train-step{loss=mse optimizer=momentum ranks=2}' | filecheck %s
// RUN: cann-opt %s -p 'train-step{loss=mse optimizer=momentum}' | filecheck %s --check-prefix=ONE
// RUN: not cann-opt %s -p 'train-step{ranks=-1}' 2>&1 | filecheck %s --check-prefix=BAD

// SyncBatchNorm: the per-shard sums of x and of (x - mean)^2 are summed over ranks, then divided by the
// global count (2 ranks x 2 images x 2 x 2 = 16: 1/16 = 0.0625); the running variance's unbiased
// correction uses it too (0.1 * 16/15).
// CHECK-LABEL: func.func @main
// CHECK:         %[[S1:.*]] = graph.reduce %{{.*}} {kind = "sum", axes = array<i64: 0>
// CHECK-NEXT:    %[[M:.*]] = "train.cross_rank_sum"(%[[S1]]) <{kind = "stat"}>
// CHECK-NEXT:    graph.constant dense<6.250000e-02>
// CHECK:         "train.cross_rank_sum"(%{{.*}}) <{kind = "stat"}>
// CHECK:         graph.constant dense<0.106666669>
// the loss is the shard's share of the global mean
// CHECK:         graph.constant dense<5.000000e-01>
// the backward pass sums the cotangents of the statistics over ranks (w's gradient needs them) ...
// CHECK:         "train.cross_rank_sum"(%{{.*}}) <{kind = "stat"}>
// ... and every parameter's gradient before the update
// CHECK-COUNT-3: "train.cross_rank_sum"(%{{.*}}) <{kind = "grad"}> : (tensor<3
// CHECK-NOT:     train.cross_rank_sum
// CHECK:         func.return

// ONE-NOT: train.cross_rank_sum
// ONE:     graph.reduce %{{.*}} {kind = "mean"

// BAD: error: train-step: ranks must be >= 0, got -1
builtin.module {
  func.func @main(%x: tensor<2x3x2x2xf32> {graph.name = "x"}) -> (tensor<2x3x2x2xf32> {graph.name = "y"}) {
    %w = graph.constant dense<[[[2.0]], [[3.0]], [[-1.0]]]> : tensor<3x1x1xf32> loc("w")
    %s = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32> loc("scale")
    %b = graph.constant dense<[0.5, 0.25, 0.125]> : tensor<3xf32> loc("bias")
    %m = graph.constant dense<0.0> : tensor<3xf32> loc("mean")
    %v = graph.constant dense<1.0> : tensor<3xf32> loc("var")
    %z = graph.mul %x, %w : (tensor<2x3x2x2xf32>, tensor<3x1x1xf32>) -> tensor<2x3x2x2xf32> loc("z")
    %y = graph.batch_norm %z, %s, %b, %m, %v {epsilon = 1.0e-05 : f32} : (tensor<2x3x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2x2xf32> loc("bn")
    func.return %y : tensor<2x3x2x2xf32>
  }
}
