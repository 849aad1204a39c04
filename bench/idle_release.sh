#!/usr/bin/env bash
# RSS growth per idle keep-alive connection: N connections, one request each, then held.
N=${N:-10000}; REL=${REL:-1s}
SH=/work/main/target/release/shellac; CL=/work/main/target/release/examples/clients
fp() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
OP=$(fp); P=$(fp); A=$(fp)
ulimit -n 65536
taskset -c 1 /work/main/target/release/examples/origin 127.0.0.1:$OP >/dev/null 2>&1 & OPID=$!
printf '[server]\nlisten = ["127.0.0.1:%s"]\nadmin = "127.0.0.1:%s"\nthreads = 1\nmax_connections = 20000\nidle_release = "%s"\n[[backend]]\nhost = "127.0.0.1"\nport = %s\n' $P $A $REL $OP > idle.toml
taskset -c 0 $SH serve --config idle.toml 2>/dev/null & SPID=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$P/hit6k && break; sleep 0.05; done
taskset -c 1 wrk -t1 -c50 -d2s http://127.0.0.1:$P/hit6k >/dev/null
rss() { awk '/VmRSS/ {print $2}' /proc/$SPID/status; }
r0=$(rss)
taskset -c 1 $CL idle 127.0.0.1:$P /hit6k $N 30 > idle-out.txt 2>&1 & CPID=$!
t0=$(date +%s.%N)
for i in $(seq 600); do grep -q IDLE_READY idle-out.txt && break; sleep 0.1; done
t1=$(date +%s.%N)
for s in 1 3 6; do sleep $([ $s = 1 ] && echo 1 || echo $(( s == 3 ? 2 : 3 ))); echo "after ${s}s: $(python3 -c "print(round(($(rss)-$r0)/$N,2))") KiB/conn"; done
gdb -p $SPID -batch -ex "call (int)malloc_trim(0)" >/dev/null 2>&1; echo "after malloc_trim: $(python3 -c "print(round(($(rss)-$r0)/$N,2))") KiB/conn"
echo "opened $(grep IDLE_READY idle-out.txt) in $(python3 -c "print(round($t1-$t0,1))") s; released=$(curl -s http://127.0.0.1:$A/stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["client_idle_released"])')"
kill $CPID $SPID $OPID; wait 2>/dev/null
