# A one-device checkpoint resumes on dp=4, tp=2 and dp=2 x tp=2 with ZeRO 3
# equal to the uninterrupted one-device run within 1e-5 (test/lib/reshard.py).
#
# RUN: rm -rf %t && mkdir -p %t && %python %s %t

import sys

import reshard

reshard.main(sys.argv[1], [("single", "dp4"), ("single", "tp2"), ("single", "dp2tp2-zero3")])
