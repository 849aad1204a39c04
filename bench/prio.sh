#!/usr/bin/env bash
# Runs a benchmark ahead of other sessions' work: CMD in a session of its own (a new
# scheduler autogroup) whose autogroup and processes are at nice -15 (needs root).
#
#   bench/prio.sh env ROUNDS=5 SECS=4 CONNS=10 bench/big.sh
#
# Why: with kernel.sched_autogroup_enabled = 1 (the default on most distributions) every
# session is one scheduling group and a process's nice only counts inside its own group, so
# `nice -n -15 bench/x.sh` run beside other sessions' builds still gets a group's share: on this
# 2-CPU machine at load 6-10, Shellac and wrk each ran 0.2-0.3 of a CPU and MiB/s measured the
# scheduler, not the servers (bench/RESULTS.md, "the 21 MB hit at 1.2× Varnish").
set -euo pipefail
(( $# > 0 )) || { echo "usage: bench/prio.sh CMD [ARGS...]" >&2; exit 2; }
exec setsid --wait bash -c 'echo -15 >/proc/self/autogroup 2>/dev/null || echo "prio.sh: cannot renice the autogroup (not root?); running at the default share" >&2; exec nice -n -15 "$@"' prio "$@"
