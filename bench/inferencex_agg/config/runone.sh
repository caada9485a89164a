#!/bin/bash
# runone.sh COMMIT LAUNCHER RUNDIR ENVFILE : run runners/launch_LAUNCHER.sh of COMMIT under stubs (PATH shims) in RUNDIR
# prepared tree per commit: trees/<commit>x (benchmarks/ + runners/ of COMMIT, '/workspace' -> '${IXWS}', helper stubs appended to benchmark_lib.sh)
C=$1; L=$2; WS=$3; EF=$4
T=${IXDIR:-/tmp/ixcfg}/trees/${C}x
rm -rf $WS; mkdir -p $WS/home
ln -s $T/benchmarks $WS/benchmarks; ln -s $T/runners $WS/runners
cd $WS
export IXCAP=$WS/cap.log IXSTUB=${IXDIR:-/tmp/ixcfg}/stubs IXWS=$WS
export PATH=$IXSTUB:/usr/bin:/bin HOME=$WS/home GITHUB_WORKSPACE=$WS USER=runner
set -a; source $EF; set +a
timeout 60 bash runners/launch_$L.sh > $WS/stdout.log 2> $WS/stderr.log
echo "IXRC $?" >> $IXCAP
touch $WS/.after
