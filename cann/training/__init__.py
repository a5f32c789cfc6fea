"""Training: the per-device memory planner (:mod:`cann.training.memplan`) and training-step graphs
(:mod:`cann.training.autodiff`, :mod:`cann.training.step`)."""
