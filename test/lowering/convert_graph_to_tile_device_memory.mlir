// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' 2>&1 | filecheck %s
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype}' 2>&1 | filecheck %s --check-prefix=FP32
// RUN: not cann-opt %s -p 'convert-graph-to-tile{soc=Ascend310 precision_mode=force_fp16}' 2>&1 | filecheck %s --check-prefix=A310

// A tensor larger than the SoC's device memory (gm_bytes: 32 GiB Ascend910, 8 GiB Ascend310) is
// refused before anything is lowered, one line per tensor that is too large; its consumers (the
// Relu of %1) are its consequences and the small Relu of %0 is fine: neither is reported.
// The Expand result has 131072 x 131073 elements: 32 GiB + 256 KiB in float16, twice that in float32.

// CHECK:      error: t: the result 1x1x131072x131073 needs 34360000512 bytes, more than the Ascend910 device memory (34359738368 bytes)
// CHECK-NOT:  error
// FP32:       error: t: the result 1x1x131072x131073 needs 68720001024 bytes, more than the Ascend910 device memory (34359738368 bytes)
// A310:       error: t: the result 1x1x131072x131073 needs 34360000512 bytes, more than the Ascend310 device memory (8589934592 bytes)
builtin.module {
  func.func @main(%0: tensor<1x1x131072x1xf32> {graph.name = "x"}) -> (tensor<1x1x131072x131073xf32> {graph.name = "y"}, tensor<1x1x131072x1xf32> {graph.name = "z"}) {
    %1 = graph.expand %0 : tensor<1x1x131072x1xf32> -> tensor<1x1x131072x131073xf32> loc("t")
    %2 = graph.relu %1 : tensor<1x1x131072x131073xf32> loc("r")
    %3 = graph.relu %0 : tensor<1x1x131072x1xf32> loc("s")
    func.return %2, %3 : tensor<1x1x131072x131073xf32>, tensor<1x1x131072x1xf32>
  }
}
