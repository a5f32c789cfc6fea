// The GM plan's option (cann.codegen.gm_plan): activations sharing device memory by default,
// --gm-reuse off (or ATC's --disable_reuse_memory 1) giving each its own bytes; the choice and both
// figures are in the .om and printed by cann-compile and cann-run --info. GELU at -O0: 7 kernels in a
// chain of 256-byte float16 tensors after the 512-byte float32 input.
// RUN: cann-compile %S/../passes/inputs/gelu.onnx -O0 -o %t.on.om | filecheck %s --check-prefix=ON
// RUN: cann-run %t.on.om --info | filecheck %s --check-prefix=INFO
// RUN: cann-compile %S/../passes/inputs/gelu.onnx -O0 -o %t.off.om --gm-reuse off | filecheck %s --check-prefix=OFF
// RUN: cann-compile %S/../passes/inputs/gelu.onnx -O0 -o %t.atc.om --disable_reuse_memory=1 | filecheck %s --check-prefix=OFF
// RUN: cmp %t.off.om %t.atc.om
// RUN: not cann-compile %S/../passes/inputs/gelu.onnx -o %t.bad.om --gm-reuse yes 2>&1 | filecheck %s --check-prefix=BAD

// ON:      7 kernels, 7 launches
// ON-NEXT: device memory 1280 bytes: weights 0, activations 1280 (reuse on; 2560 without)
// INFO:      kernels: 7  launches: 7  gm_size: 1280
// INFO-NEXT: device memory 1280 bytes: weights 0, activations 1280 (reuse on; 2560 without)
// OFF:      7 kernels, 7 launches
// OFF-NEXT: device memory 2560 bytes: weights 0, activations 2560 (reuse off)
// BAD: error: --gm-reuse: expected on or off, got 'yes'
