// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

%c = "graph.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<5xf32>
// CHECK: 'graph.constant' value type tensor<4xf32> does not match result type tensor<5xf32>

// -----
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%0 = graph.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
// CHECK: 'graph.conv2d' expects pads to have 4 elements, got 2

// -----
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%0 = graph.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
// CHECK: 'graph.conv2d' result shape 1x4x8x8 does not match expected 1x4x6x6

// -----
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x2x3x3xf32>
%0 = graph.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
// CHECK: 'graph.conv2d' weight expects 2 input channels (group 1), input has 3

// -----
%x = "test.op"() : () -> tensor<1x3x8x8xf32>
%w = "test.op"() : () -> tensor<4x3x3x3xf32>
%b = "test.op"() : () -> tensor<3xf32>
%0 = graph.conv2d %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
// CHECK: 'graph.conv2d' bias must have shape 4, got 3

// -----
%x = "test.op"() : () -> tensor<1x3x8xf32>
%w = "test.op"() : () -> tensor<4x3x3xf32>
%0 = graph.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6xf32>
// CHECK: 'graph.conv2d' expects input of rank 4, got 3

// -----
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%s = "test.op"() : () -> tensor<3xf32>
%0 = graph.batch_norm %x, %s, %s, %s, %s {epsilon = 1.0e-05 : f32} : (tensor<1x4x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x4x8x8xf32>
// CHECK: 'graph.batch_norm' expects scale of shape 4 (channels)

// -----
%x = "test.op"() : () -> tensor<1x4xf32>
%0 = "graph.relu"(%x) : (tensor<1x4xf32>) -> tensor<1x5xf32>
// CHECK: attribute tensor<1x4xf32> expected from variable 'T', but got tensor<1x5xf32>

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%y = "test.op"() : () -> tensor<4xf32>
%0 = graph.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
// CHECK: 'graph.add' operands are not broadcastable: tensor<2x3xf32> and tensor<4xf32>

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%y = "test.op"() : () -> tensor<3xf32>
%0 = graph.sub %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
// CHECK: 'graph.sub' result shape 3x3 does not match expected 2x3

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%y = "test.op"() : () -> tensor<3xf16>
%0 = graph.mul %x, %y : (tensor<2x3xf32>, tensor<3xf16>) -> tensor<2x3xf32>
// CHECK: 'graph.mul' expects one element type for all operands and results

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%y = "test.op"() : () -> tensor<2xf32>
%0 = graph.div %x, %y : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
// CHECK: 'graph.div' operands are not broadcastable

// -----
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%0 = graph.max_pool %x {ceil_mode = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x3x3xf32>
// CHECK: 'graph.max_pool' expects kernel_shape to have 2 elements, got 1

// -----
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%0 = graph.max_pool %x {ceil_mode = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
// CHECK: 'graph.max_pool' result shape 1x4x4x4 does not match expected 1x4x3x3

// -----
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%0 = graph.avg_pool %x {ceil_mode = 2 : i64, count_include_pad = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x3x3xf32>
// CHECK: 'graph.avg_pool' expects ceil_mode 0 or 1

// -----
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%0 = graph.avg_pool %x {ceil_mode = 0 : i64, count_include_pad = 3 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x3x3xf32>
// CHECK: 'graph.avg_pool' expects count_include_pad 0 or 1

// -----
%x = "test.op"() : () -> tensor<1x4x3x3xf32>
%0 = graph.max_pool %x {ceil_mode = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 5, 5>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x4x3x3xf32> -> tensor<1x4x1x1xf32>
// CHECK: 'graph.max_pool' window 5x5 is larger than the padded input 3x3: the output would be -1x-1

// -----
%x = "test.op"() : () -> tensor<1x4x2x2xf32>
%0 = graph.avg_pool %x {ceil_mode = 1 : i64, count_include_pad = 0 : i64, dilations = array<i64: 2, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x2x2xf32> -> tensor<1x4x1x1xf32>
// CHECK: 'graph.avg_pool' window 5x3 is larger than the padded input 3x2: the output would be 0x1

// -----
%x = "test.op"() : () -> tensor<1x4x4x4xf32>
%w = "test.op"() : () -> tensor<2x4x5x5xf32>
%0 = graph.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<2x4x5x5xf32>) -> tensor<1x2x1x1xf32>
// CHECK: 'graph.conv2d' window 5x5 is larger than the padded input 4x4: the output would be 0x0

// -----
%x = "test.op"() : () -> tensor<1x4x8x8xf32>
%0 = graph.global_avg_pool %x : tensor<1x4x8x8xf32> -> tensor<1x4xf32>
// CHECK: 'graph.global_avg_pool' result shape 1x4 does not match expected 1x4x1x1

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%b = "test.op"() : () -> tensor<4x5xf32>
%0 = graph.gemm %a, %b {alpha = 1.0 : f32, beta = 1.0 : f32, trans_a = 0 : i64, trans_b = 0 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
// CHECK: 'graph.gemm' inner dimensions differ: 3 and 4

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%b = "test.op"() : () -> tensor<5x3xf32>
%c = "test.op"() : () -> tensor<3xf32>
%0 = graph.gemm %a, %b, %c {alpha = 1.0 : f32, beta = 1.0 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<2x3xf32>, tensor<5x3xf32>, tensor<3xf32>) -> tensor<2x5xf32>
// CHECK: 'graph.gemm' C is not broadcastable to 2x5

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%b = "test.op"() : () -> tensor<4x5xf32>
%0 = graph.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
// CHECK: 'graph.matmul' operand shapes are incompatible

// -----
%a = "test.op"() : () -> tensor<7x2x3xf32>
%b = "test.op"() : () -> tensor<3x5xf32>
%0 = graph.matmul %a, %b : (tensor<7x2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
// CHECK: 'graph.matmul' result shape 2x5 does not match expected 7x2x5

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%b = "test.op"() : () -> tensor<2x4xf32>
%0 = graph.concat %a, %b {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x7xf32>
// CHECK: 'graph.concat' axis 2 out of range for rank 2

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%b = "test.op"() : () -> tensor<3x4xf32>
%0 = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x7xf32>
// CHECK: 'graph.concat' inputs must agree in rank and every dimension but axis

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.reshape %a : tensor<2x3xf32> -> tensor<7xf32>
// CHECK: 'graph.reshape' must keep the number of elements

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.transpose %a {perm = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
// CHECK: 'graph.transpose' perm [0, 0] is not a permutation of 0..1

// -----
%a = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.softmax %a {axis = 2 : i64} : tensor<2x3xf32>
// CHECK: 'graph.softmax' axis 2 out of range for rank 2

// -----
%a = "test.op"() : () -> tensor<1x4x8x8xf32>
%0 = graph.lrn %a {alpha = 1.0e-04 : f32, beta = 0.75 : f32, bias = 1.0 : f32, size = 0 : i64} : tensor<1x4x8x8xf32>
// CHECK: 'graph.lrn' expects size >= 1

// -----
%a = "test.op"() : () -> tensor<?x4xf32>
%0 = graph.relu %a : tensor<?x4xf32>
// CHECK: 'graph.relu' expects static tensor shapes, got tensor<?x4xf32>
