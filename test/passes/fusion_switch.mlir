// The ATC fusion switch file turns fusion passes off, in its JSON and its text form.
// RUN: cann-compile %S/inputs/conv_bn_relu.onnx --emit graph -o - | filecheck %s --check-prefix=ON
// RUN: cann-compile %S/inputs/conv_bn_relu.onnx --emit graph -o - --fusion_switch_file %S/inputs/all_off.json | filecheck %s --check-prefix=OFF
// RUN: cann-compile %S/inputs/conv_bn_relu.onnx --emit graph -o - --fusion_switch_file %S/inputs/ub_off.cfg | filecheck %s --check-prefix=UBOFF
// RUN: cann-compile %S/inputs/conv_bn_relu.onnx --emit graph -o - -O0 | filecheck %s --check-prefix=OFF

// ON:        graph.fused "cube_epilogue"
// ON-NEXT:     graph.conv2d
// ON-NEXT:     graph.relu
// ON-NOT:    graph.batch_norm

// OFF-NOT:   graph.fused
// OFF:       graph.conv2d
// OFF:       graph.batch_norm
// OFF-NEXT:  graph.relu

// UBOFF-NOT:  graph.fused
// UBOFF:      graph.conv2d
// UBOFF-NEXT: graph.relu

// GraphFusion GeluFusionPass (graph-recompose) on and off.
// RUN: cann-compile %S/inputs/gelu.onnx --emit graph -o - | filecheck %s --check-prefix=GELU
// RUN: cann-compile %S/inputs/gelu.onnx --emit graph -o - --fusion_switch_file %S/inputs/gelu_off.cfg | filecheck %s --check-prefix=NOGELU
// GELU:       graph.gelu %{{.*}} {approximate = "none"}
// GELU-NOT:   graph.erf
// NOGELU-NOT: graph.gelu
// NOGELU:     graph.erf
