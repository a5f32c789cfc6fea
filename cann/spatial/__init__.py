"""Very large images on several devices (issue 15): compile a model into one program per device of an R x C
grid (:mod:`cann.spatial.compile`), store them as one bundle file (:mod:`cann.spatial.bundle`) and run them
with halo exchanges over MPI or emulated in one process (:mod:`cann.spatial.run`)."""
