#!/usr/bin/env bash
# Session 17: room for the next launch. Under PDL a launch's blocks start only as the blocks before them exit (one
# block a SM fills its shared memory and registers), so each SM's memory idles from its last item's landing until the
# next block's first copies (call a's timelines: about 2 µs of a 20.5 µs launch). Built for 2 resident blocks a SM
# (family.py TMA_SM_BLOCKS = 2: half-row items, 92 KB, 96 registers) and launched with 1 a SM, the next launch's
# block can start beside the last one's tail and fill its ring then; with 2 a SM, as a probe of the same build.
#   bash tools/h200/session17-b.sh
CALL=b SESSION=session17 CHECKS=0 ROUNDS=40 exec bash tools/h200/tma_session_check.sh
