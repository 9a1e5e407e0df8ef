#!/usr/bin/env bash
# Reruns the tests marked `isa` (results that depend on the CPU's vector units) as the weaker CPU kinds
# the project meets would run them, by capping the units each library may use (attnlab's own CPU
# detection honours the same caps: attnlab.models.cpu). A failure that only an AVX2-only CPU would
# show then shows on every developer's machine. Called by `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }

rerun() {
    local kind=$1
    shift
    echo "== the vector-unit tests again, as on $kind: $*"
    env "$@" "$PY" -m pytest -q -n auto -m isa -p no:cacheprovider
}

# An AMD EPYC with AVX2 only (no AVX-512, no VNNI, no AMX): every library capped to AVX2.
if has avx512f || has avx_vnni; then
    rerun "a CPU with AVX2 only" ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
        MKL_ENABLE_INSTRUCTIONS=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2
fi
# An AMD Zen 5 (AVX-512 with VNNI and BF16, no AMX; MKL runs its AVX2 path on it).
if has amx_tile; then
    rerun "a CPU with AVX-512 and no AMX" ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 \
        MKL_ENABLE_INSTRUCTIONS=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX512_E1
fi
