"""Spatial partitioning of convolutional networks over a grid of devices (issue 15): the halo
arithmetic (:mod:`cann.passes.spatial.halo`), pure and separately tested."""
