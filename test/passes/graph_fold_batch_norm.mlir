// RUN: cann-opt %s --split-input-file -p graph-fold-batch-norm | filecheck %s

// Conv + BatchNormalization: the BN folds into the conv's weights and bias.
// w * s with s = scale / sqrt(var + eps) = 2 / sqrt(3 + 1) = 1; bias (0 - mean) * s + beta = -1 + 0.5.
// CHECK-LABEL: func.func @conv_bn
// CHECK-NOT:     graph.batch_norm
// CHECK-DAG:     %[[W:.*]] = graph.constant dense<3.000000e+00> : tensor<2x1x1x1xf32>
// CHECK-DAG:     %[[B:.*]] = graph.constant dense<-5.000000e-01> : tensor<2xf32>
// CHECK:         %[[C:.*]] = graph.conv2d %{{.*}}, %[[W]], %[[B]]
// CHECK-NEXT:    func.return %[[C]]
builtin.module {
  func.func @conv_bn(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
    %w = graph.constant dense<3.0> : tensor<2x1x1x1xf32>
    %s = graph.constant dense<2.0> : tensor<2xf32>
    %b = graph.constant dense<0.5> : tensor<2xf32>
    %m = graph.constant dense<1.0> : tensor<2xf32>
    %v = graph.constant dense<3.0> : tensor<2xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
    %y = graph.batch_norm %c, %s, %b, %m, %v {epsilon = 1.0 : f32} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
    func.return %y : tensor<1x2x2x2xf32>
  }
}

// -----

// BN followed by Mul and Add by per-channel constants (Caffe2 exports): one BN remains.
// CHECK-LABEL: func.func @bn_scale
// CHECK:         %[[Y:.*]] = graph.batch_norm
// CHECK-NOT:     graph.mul
// CHECK-NOT:     graph.add
// CHECK:         func.return %[[Y]]
builtin.module {
  func.func @bn_scale(%x: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
    %s = graph.constant dense<2.0> : tensor<2xf32>
    %b = graph.constant dense<0.5> : tensor<2xf32>
    %m = graph.constant dense<1.0> : tensor<2xf32>
    %v = graph.constant dense<3.0> : tensor<2xf32>
    %k = graph.constant dense<4.0> : tensor<2x1x1xf32>
    %y = graph.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0 : f32} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
    %z = graph.mul %y, %k : (tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) -> tensor<1x2x2x2xf32>
    %w = graph.add %z, %k : (tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) -> tensor<1x2x2x2xf32>
    func.return %w : tensor<1x2x2x2xf32>
  }
}

// -----

// Must not fold: the conv result has a second user, which needs the unnormalized value.
// CHECK-LABEL: func.func @two_users
// CHECK:         graph.conv2d
// CHECK:         graph.batch_norm
// CHECK:         graph.add
builtin.module {
  func.func @two_users(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
    %w = graph.constant dense<3.0> : tensor<2x1x1x1xf32>
    %s = graph.constant dense<2.0> : tensor<2xf32>
    %b = graph.constant dense<0.5> : tensor<2xf32>
    %m = graph.constant dense<1.0> : tensor<2xf32>
    %v = graph.constant dense<3.0> : tensor<2xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
    %y = graph.batch_norm %c, %s, %b, %m, %v {epsilon = 1.0 : f32} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
    %r = graph.add %y, %c : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
    func.return %r : tensor<1x2x2x2xf32>
  }
}
