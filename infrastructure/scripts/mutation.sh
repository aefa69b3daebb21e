#!/usr/bin/env bash
# Mutation testing of the modules that decide outcomes (docs/mutation.md), one module at a time:
#   bash infrastructure/scripts/mutation.sh [MODULE ...]
# MODULE is a module under cdif_harvester.domain (discovery.robots, ...); default: all of
# docs/mutation.md's table. MUTATION_JOBS sets the number of workers (default 2).
#
# mutmut 3 imports the mutated copy only from mutants/src (or ./ or source/), and names mutants
# after the path below that; our package lives in layers/core. So it runs in a scratch directory,
# .mutation/, whose src/ is a link to layers/core; [tool.mutmut] in pyproject.toml is read there.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
mutmut=${MUTMUT:-$root/.venv/bin/mutmut}
python=${PYTHON:-$root/.venv/bin/python}
jobs=${MUTATION_JOBS:-2}
if [ ! -x "$mutmut" ]; then
    echo "mutation.sh: mutmut is not installed at $mutmut; run it as 'make mutation' (MODULES=...)," >&2
    echo "which installs it, or install it first with 'make .venv/.mutation-installed'." >&2
    exit 2
fi
work=$root/.mutation
if [ $# -gt 0 ]; then
    modules=("$@")
else
    modules=(discovery.incremental discovery.robots resolution.weblinks discovery.lastmod discovery.urls
        records.extraction)
fi

# A fresh copy every time: mutmut keeps results of mutants whose function did not change, even
# when the tests did.
rm -rf "$work"
mkdir -p "$work"
ln -s "$root/layers/core" "$work/src"
for name in tests bench functions infrastructure template.yaml pyproject.toml; do
    ln -s "$root/$name" "$work/$name"
done
cd "$work"

for module in "${modules[@]}"; do
    echo "mutmut: cdif_harvester.domain.$module" >&2
    if ! "$mutmut" run --max-children "$jobs" "cdif_harvester.domain.$module.*" \
        >"$work/$module.log" 2>&1; then
        tail -n 40 "$work/$module.log" >&2
        echo "mutmut failed on $module: see $work/$module.log" >&2
        exit 1
    fi
done

"$mutmut" results --all true >"$work/results.txt"
"$python" - "$work/results.txt" "${modules[@]}" <<'PY'
"""Per module: mutants killed (a test failed or timed out) out of all, and the survivors."""

import sys
from collections import Counter

results_path, modules = sys.argv[1], sys.argv[2:]
status_by_mutant = {}
with open(results_path, encoding="utf-8") as results:
    for line in results:
        name, _, status = line.strip().rpartition(": ")
        status_by_mutant[name] = status
for module in modules:
    prefix = f"cdif_harvester.domain.{module}."
    mine = {name: status for name, status in status_by_mutant.items() if name.startswith(prefix)}
    counts = Counter(mine.values())
    killed = counts["killed"] + counts["timeout"]
    total = len(mine)
    score = 100 * killed / total if total else 0.0
    others = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"{module}: {killed}/{total} killed ({score:.1f}%): {others}")
    for name, status in sorted(mine.items()):
        if status not in ("killed", "timeout"):
            print(f"    {status}: {name.removeprefix(prefix)}")
PY
