#!/bin/bash
# How log.txt here was made (x86_64, Python 3.11.7). The 1.4.1 environment, /tmp/own/v141:
#   python3.11 -m venv /tmp/own/v141 && /tmp/own/v141/bin/pip install torch==2.13.0
#   /tmp/own/v141/bin/pip install --no-deps .gate/release-table/wheels/executorch-1.4.1-cp311-cp311-manylinux_2_28_x86_64.whl
#   /tmp/own/v141/bin/pip install numpy ruamel.yaml pyyaml flatbuffers packaging tabulate typing-extensions sympy
#   /tmp/own/v141/bin/pip install --no-deps torchao   # 0.18.0; the XNNPACK partitioner imports it
# The 1.5.1 environment is the gate's own .venv (executorch 1.5.1, torch 2.13.0).
set -u
HERE=/work/main/docs/records/runs/2026-12-04-local-modules-meet
V141=/tmp/own/v141/bin/python V151=/work/main/.venv/bin/python
export MEET_DIR=/tmp/own/meet141; mkdir -p $MEET_DIR
filter() { grep -v -E "cpuinfo_utils|UserWarning|_conversion_method|torchao|KernelPreference|^  warnings.warn|return cls.__new__"; }
SITE=$($V141 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "\$ $V141 -m pip list | grep -E '^(executorch|torch) '"; $V141 -m pip list 2>/dev/null | grep -E '^(executorch|torch) '
echo "\$ g++ -O1 -shared -fPIC -std=c++17 -DET_LOG_ENABLED=0 -I\$SITE/torch/include -I\$SITE/executorch/include -I<python3.11 include> handover.cpp -o handover\$EXT_SUFFIX"
g++ -O1 -shared -fPIC -std=c++17 -DET_LOG_ENABLED=0 -I$SITE/torch/include -I$SITE/executorch/include \
  -I$(python3.11 -c "import sysconfig;print(sysconfig.get_paths()['include'])") $HERE/handover.cpp \
  -o $HERE/handover$(python3.11 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))") && echo built
for step in export handover selective_build registries threads rtld-global; do
  echo; echo "\$ MEET_DIR=$MEET_DIR python meet.py $step   # executorch 1.4.1"
  $V141 -W ignore $HERE/meet.py $step 2>&1 | filter; echo "exit ${PIPESTATUS[0]}"
done
export MEET_DIR=/tmp/own/meet151; mkdir -p $MEET_DIR
for step in rtld-global export-copy; do
  echo; echo "\$ MEET_DIR=$MEET_DIR python meet.py $step   # executorch 1.5.1"
  $V151 -W ignore $HERE/meet.py $step 2>&1 | filter; echo "exit ${PIPESTATUS[0]}"
done
rm -f $HERE/handover*.so
