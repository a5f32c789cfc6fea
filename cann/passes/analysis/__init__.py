"""Analyses over the IR (no rewriting): results are recorded as attributes for later stages."""
