# Between layouts other than one device: ZeRO 1's flat optimizer slots into
# tp=2 and into ZeRO 2, tp=2 into dp=2 x tp=2 with ZeRO 3, and that into
# dp=4, each equal to the uninterrupted one-device run within 1e-5
# (test/lib/reshard.py).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import sys

import reshard

reshard.main(sys.argv[1], [("dp2-zero1", "tp2"), ("tp2", "dp2-zero2"),
                           ("tp2", "dp2tp2-zero3"), ("dp2tp2-zero3", "dp4")])
