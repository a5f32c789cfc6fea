"""The modeled AI Core: functional execution and timing of offline models.

* :mod:`cann.sim.core` -- :class:`~cann.sim.core.AICore` (buffers + instruction interpreter),
  :class:`~cann.sim.core.KernelStats`, :class:`~cann.sim.core.SimError`;
* :mod:`cann.sim.cost` -- the cycle cost of every instruction, from the SoC description;
* :mod:`cann.sim.executor` -- :func:`~cann.sim.executor.run_model` for a whole ``.om``.

See docs/core-model.md.
"""
