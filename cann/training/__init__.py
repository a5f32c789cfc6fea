"""Training: training-step programs (:mod:`cann.training.program`: a model + a loss + an optimizer
-> one graph-dialect program; reverse-mode differentiation in :mod:`cann.training.autodiff`), their
runner on the simulator (:mod:`cann.training.trainer`), data parallelism on MPI
(:mod:`cann.training.data_parallel`, ``cann-train --data-parallel``), sharded (ZeRO) data parallelism
(:mod:`cann.training.zero`, ``--zero``) and the per-device memory planner
(:mod:`cann.training.memplan`, ``cann-memplan``).

    from cann.training import Adam, Trainer
    trainer = Trainer.from_model("gpt_block.onnx", optimizer=Adam(lr=2e-3))
    loss = trainer.step({"input_ids": ids}, one_hot_next_tokens)
"""

from cann.training.program import Adam, Momentum, TrainingProgram, build  # noqa: F401
from cann.training.trainer import Trainer  # noqa: F401
from cann.training.data_parallel import DataParallelTrainer  # noqa: F401
from cann.training.zero import ShardedTrainer  # noqa: F401
