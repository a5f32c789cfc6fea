// RUN: cann-opt %s --split-input-file -p 'train-step{loss=mse}' | filecheck %s --check-prefix=GRAD
// RUN: cann-opt %s --split-input-file -p 'train-step{loss=mse optimizer=momentum alpha=0.5}' | filecheck %s --check-prefix=MOM
// RUN: cann-opt %s --split-input-file -p 'train-step{optimizer=adam gradients=true}' | filecheck %s --check-prefix=ADAM
// RUN: not cann-opt %s --split-input-file -p 'train-step{optimizer=sgd}' 2>&1 | filecheck %s --check-prefix=BADOPT

// y = relu(x @ w * 2): w (a constant of more than one element) becomes an input; the scalar 2 stays.
// GRAD-LABEL: func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}, %0: tensor<2x4xf32> {graph.name = "target"}, %w: tensor<3x4xf32> {graph.name = "w"}) -> (tensor<1xf32> {graph.name = "loss"}, tensor<3x4xf32> {graph.name = "w.grad"})
// GRAD:         %s = graph.constant dense<2.000000e+00> : tensor<f32>
// GRAD:         %[[D:.*]] = graph.sub %y, %0
// GRAD:         %[[SQ:.*]] = graph.mul %[[D]], %[[D]]
// GRAD:         %[[MEAN:.*]] = graph.reduce %[[SQ]] {kind = "mean", axes = array<i64: 0, 1>, keepdims = 1 : i64}
// GRAD:         %[[LOSS:.*]] = graph.reshape %[[MEAN]] : tensor<1x1xf32> -> tensor<1xf32>
// the relu's gradient passes where its input is positive
// GRAD:         %[[POS:.*]] = graph.compare %a, %{{.*}} {kind = "gt"}
// GRAD:         %[[DA:.*]] = graph.where %[[POS]], %{{.*}}, %{{.*}}
// GRAD:         %[[DM:.*]] = graph.mul %[[DA]], %s
// dW = x^T @ dM; no gradient of x, of the target or of the scalar is built
// GRAD-NOT:     graph.neg
// GRAD:         %[[XT:.*]] = graph.transpose %x {perm = array<i64: 1, 0>}
// GRAD-NEXT:    %[[DW:.*]] = graph.matmul %[[XT]], %[[DM]] : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// GRAD-NEXT:    func.return %[[LOSS]], %[[DW]]

// Momentum (ONNX): V' = alpha V + grad_coef G, W' = W - lr V'; inputs lr, grad_coef and the velocity.
// MOM-LABEL: func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}, %0: tensor<2x4xf32> {graph.name = "target"}, %w: tensor<3x4xf32> {graph.name = "w"}, %1: tensor<1xf32> {graph.name = "lr"}, %2: tensor<1xf32> {graph.name = "grad_coef"}, %3: tensor<3x4xf32> {graph.name = "w.velocity"}) -> (tensor<1xf32> {graph.name = "loss"}, tensor<3x4xf32> {graph.name = "w"}, tensor<3x4xf32> {graph.name = "w.velocity"})
// MOM:         %[[DW:[0-9]+]] = graph.matmul
// MOM:         %[[ALPHA:.*]] = graph.constant dense<5.000000e-01> : tensor<f32>
// MOM-NEXT:    %[[AV:.*]] = graph.mul %3, %[[ALPHA]]
// MOM-NEXT:    %[[BG:.*]] = graph.mul %2, %[[DW]]
// MOM-NEXT:    %[[V:.*]] = graph.add %[[AV]], %[[BG]]
// MOM-NEXT:    %[[STEP:.*]] = graph.mul %1, %[[V]]
// MOM-NEXT:    %[[W:.*]] = graph.sub %w, %[[STEP]]
// MOM-NEXT:    func.return %{{.*}}, %[[W]], %[[V]]

// Adam with the softmax cross-entropy (log-sum-exp minus the target-weighted logits) and the gradients out.
// ADAM-LABEL: func.func @main
// ADAM-SAME:    {graph.name = "w.momentum1"}, %{{.*}}: tensor<3x4xf32> {graph.name = "w.momentum2"})
// ADAM-SAME:    -> (tensor<1xf32> {graph.name = "loss"}, tensor<3x4xf32> {graph.name = "w"}, tensor<3x4xf32> {graph.name = "w.momentum1"}, tensor<3x4xf32> {graph.name = "w.momentum2"}, tensor<3x4xf32> {graph.name = "w.grad"})
// ADAM:         graph.reduce %y {kind = "log_sum_exp", axes = array<i64: 1>, keepdims = 1 : i64}
// ADAM:         graph.sqrt
// ADAM:         graph.constant dense<1.000000e-06> : tensor<f32>
// ADAM:         graph.div

// BADOPT: error: train-step: unknown optimizer 'sgd' (known: none, momentum, adam)
builtin.module {
  func.func @main(%x: tensor<2x3xf32> {graph.name = "x"}) -> (tensor<2x4xf32> {graph.name = "y"}) {
    %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 1.0, 2.0, 3.0]]> : tensor<3x4xf32> loc("w")
    %s = graph.constant dense<2.0> : tensor<f32> loc("s")
    %m = graph.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32> loc("mm")
    %a = graph.mul %m, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("scale")
    %y = graph.relu %a : tensor<2x4xf32> loc("relu")
    func.return %y : tensor<2x4xf32>
  }
}

