// RUN: cann-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Fields are written in table order, each once.
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 0 : i64} {
  ascend.pipe_barrier event=6
}
// CHECK: pipe_barrier: expected field 'pipe', got 'event' (fields in order: pipe)

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 0 : i64} {
  ascend.set_flag src_pipe=4, dst_pipe=1
}
// CHECK: Expected ',' between fields of set_flag

// -----
ascend.kernel @k attributes {block_dim = 1 : i64, num_args = 0 : i64} {
  ascend.pipe_barrier pipe=6.5
}
// CHECK: Expected integer literal

// -----
ascend.kernel @k attributes {num_args = 0 : i64} {
}
// CHECK: ascend.kernel: missing attribute block_dim
