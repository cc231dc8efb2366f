# Resharding with --precision bf16, whose ZeRO 1 and 2 keep only the dp
# slices of the f32 parameters (master weights) and gather their bf16 and
# f32 copies once a step: ZeRO 2's checkpoint resumed on one device, and one
# device's on ZeRO 1, each equal to the uninterrupted one-device bf16 run
# within 1e-5 (test/lib/reshard.py); the checkpoints hold the parameters and
# Adam moments, not the copies.
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import sys

import reshard

reshard.main(sys.argv[1], [("dp2-zero2", "single"), ("single", "dp2-zero1")], precision="bf16")
