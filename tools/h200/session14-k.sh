#!/usr/bin/env bash
# Session 14, call k, on nvidia-h200 (2026-12-01), on 48d7934's kernel. Two questions for the next sessions: (1) do
# blocks out of step move the memory faster (session 13: p3's middle 4.57 TB/s with its blocks spread by its start,
# p3s8's 4.11 with them in step)? ds, a timing variant: the odd heavy blocks start half an item's time late; its
# timeline's middle rate against the tree's. (2) can later claims absorb p3's slow blocks? p3cw1 / p3cw2: p3 with the
# last round claimed 1 / 2 items ahead (session14-d's claims, built on p3 over this kernel).
#   bash tools/h200/session14-k.sh
CALL=k SESSION=session14 CHECKS=0 \
  VARIANTS="ds=session14-k-ds.patch p3cw1=session13-m-p3.patch,session14-k-p3cw1.patch p3cw2=session13-m-p3.patch,session14-k-p3cw2.patch" \
  TIMELINES="tree:1 ds:1 p3cw1:2" exec bash tools/h200/tma_session_check.sh
