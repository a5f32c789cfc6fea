"""The modeled AI Core: functional execution and timing of offline models.

* :mod:`cann.sim.core` -- :class:`~cann.sim.core.AICore` (buffers + instruction interpreter, one
  or several cores in lockstep), :class:`~cann.sim.core.KernelStats`, :class:`~cann.sim.core.SimError`;
  its units :mod:`cann.sim.mte` (DMA, cube) and :mod:`cann.sim.vector`, on :mod:`cann.sim.lanes`;
  :mod:`cann.sim.memo` -- repeated img2col results and float32 cube operands kept (exactly);
* :mod:`cann.sim.lockstep` -- which blocks of a launch run together, exactly as one after another;
* :mod:`cann.sim.cost` -- the cycle cost of every instruction, from the SoC description;
* :mod:`cann.sim.executor` -- :func:`~cann.sim.executor.run_model` for a whole ``.om``; its
  statistics in :mod:`cann.sim.stats`;
* :mod:`cann.sim.timing_only` -- :func:`~cann.sim.timing_only.time_model`: the same statistics
  without computing values (``Model.time``).

See docs/core-model.md.
"""
