// RUN: cann-opt %s --split-input-file -p 'keep-dtype{nodes="big,soft"}' | filecheck %s --check-prefix=NODES
// RUN: cann-opt %s --split-input-file -p 'keep-dtype{rules=true}' | filecheck %s --check-prefix=RULES
// RUN: cann-opt %s --split-input-file -p 'keep-dtype' | filecheck %s --check-prefix=NONE
// RUN: cann-opt %s --split-input-file -p 'keep-dtype{nodes="big" rules=true}' | filecheck %s --check-prefix=BOTH

// The kept Mul reads the fp16 Relu through an f32 boundary cast and feeds the fp16 Add through an
// f16 one; the Flatten (reshape) after the kept Softmax follows it without a cast; a constant needs none.
// NODES:       builtin.module attributes {cann.kept_fp32 = [2 : i64, 4 : i64]}
// NODES-LABEL: func.func @main
// NODES:         %[[R:.*]] = graph.relu %{{.*}} : tensor<1x4xf32>
// NODES-NEXT:    %[[C1:.*]] = graph.cast %[[R]] {cann.device_dtype = "f32"} : tensor<1x4xf32> -> tensor<1x4xf32>
// NODES-NEXT:    %[[M:.*]] = graph.mul %[[C1]], %{{.*}} {cann.keep_dtype}
// NODES-NEXT:    %[[C2:.*]] = graph.cast %[[M]] {cann.device_dtype = "f16"} : tensor<1x4xf32> -> tensor<1x4xf32>
// NODES-NEXT:    %[[A:.*]] = graph.add %[[C2]], %[[C2]] : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
// NODES-NEXT:    %[[C3:.*]] = graph.cast %[[A]] {cann.device_dtype = "f32"}
// NODES-NEXT:    %[[S:.*]] = graph.softmax %[[C3]] {cann.keep_dtype, axis = 1 : i64}
// NODES-NEXT:    %[[F:.*]] = graph.reshape %[[S]] {cann.keep_dtype}
// NODES-NEXT:    func.return %[[F]], %[[A]]
// RULES:       builtin.module attributes {cann.kept_fp32 = [1 : i64, 4 : i64]}
// RULES-LABEL: func.func @main
// RULES-NOT:     graph.mul {{.*}}cann.keep_dtype
// RULES:         graph.cast %{{.*}} {cann.device_dtype = "f32"}
// RULES-NEXT:    graph.softmax {{.*}}cann.keep_dtype
// NONE-NOT:    cann.keep_dtype
// NONE-NOT:    cann.device_dtype
// NONE-NOT:    cann.kept_fp32
// BOTH:        cann.kept_fp32 = [2 : i64, 4 : i64]
builtin.module {
  func.func @main(%x: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>) {
    %k = graph.constant dense<1000.0> : tensor<1x4xf32>
    %r = graph.relu %x : tensor<1x4xf32> loc("relu")
    %m = graph.mul %r, %k : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32> loc("big")
    %a = graph.add %m, %m : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32> loc("sum")
    %s = graph.softmax %a {axis = 1 : i64} : tensor<1x4xf32> loc("soft")
    %f = graph.reshape %s : tensor<1x4xf32> -> tensor<1x4xf32> loc("flat")
    func.return %f, %a : tensor<1x4xf32>, tensor<1x4xf32>
  }
}
