"""Sizes shared by the verify worker (which imports torch) and the test emitter (which does not)."""

VOCAB = 1037  # not a multiple of 64 * TP: the last shard keeps padding rows
HIDDEN = 64
NUM_STEPS = 3  # fabricated MTP steps
START_LAYER = 5  # fabricated mtp_start_layer_idx
