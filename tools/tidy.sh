#!/usr/bin/env bash
# clang-tidy over the host C++ code: every .cpp file of src/, kernels/ and tests/ that the build
# compiles (BUILD_DIR/compile_commands.json; CUDA sources are left out), with the checks of
# .clang-tidy, in parallel. Exits 1 on any finding, listing them and a count per check.
#   tools/tidy.sh [-p BUILD_DIR] [FILE...]     BUILD_DIR: default build (tools/build.sh)
# TIDY_JOBS: parallel clang-tidy processes (default: nproc).
# CLANG_TIDY names the binary (default clang-tidy; .clang-tidy is checked with clang-tidy 14,
# Debian 12's `clang-tidy` package, which tools/install_deps.sh --lint installs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=build
if [ "${1:-}" = -p ]; then
  build=${2:?"usage: $0 [-p BUILD_DIR] [FILE...]"}
  shift 2
fi
case "${1:-}" in -*) echo "usage: $0 [-p BUILD_DIR] [FILE...]" >&2; exit 2 ;; esac
CLANG_TIDY=${CLANG_TIDY:-clang-tidy}
command -v "$CLANG_TIDY" >/dev/null || { echo "$0: $CLANG_TIDY not found (tools/install_deps.sh --lint)" >&2; exit 2; }
db=$build/compile_commands.json
[ -f "$db" ] || { echo "$0: $db not found: configure first (tools/build.sh, or cmake -S . -B $build)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The files: those named, else the host .cpp sources of the compilation database.
python3 - "$db" "$root" "$@" >"$work/files" <<'PY' || exit 2
import json, os, sys
db, root, named = sys.argv[1], sys.argv[2], sys.argv[3:]
entries = {os.path.normpath(os.path.join(e["directory"], e["file"])) for e in json.load(open(db))}
if named:
    files = [os.path.normpath(os.path.join(root, f)) for f in named]
    missing = [f for f in files if f not in entries]
    if missing:
        sys.exit(f"not in {db}: {' '.join(missing)}")
else:
    dirs = tuple(os.path.join(root, d) + os.sep for d in ("src", "kernels", "tests"))
    files = [f for f in entries if f.endswith(".cpp") and f.startswith(dirs)]
print("\n".join(sorted(files)))
PY
count=$(wc -l <"$work/files")
((count)) || { echo "$0: no .cpp files in $db" >&2; exit 2; }

# One log per file. Findings in the repository's headers are reported too (--header-filter,
# anchored at this checkout; .clang-tidy's own filter is for editors). The build's -Werror is
# lifted: compiler warnings are the compiler's business (GE_WERROR), not clang-tidy's.
start=$SECONDS
export CLANG_TIDY build work root
xargs -r -n 1 -P"${TIDY_JOBS:-$(nproc)}" bash -c '
  f=$1
  log=$work/$(echo "${f#$root/}" | tr / _).log
  "$CLANG_TIDY" -p "$build" --quiet --header-filter="^$root/(include|src|kernels|tests)/" --extra-arg=-Wno-error \
    "$f" >"$log" 2>&1 || echo "$f" >>"$work/failed"' "$0" <"$work/files"

# Findings, each once (a header's are seen from every file that includes it), by file.
cat "$work"/*.log | grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' | sed "s|^$root/||" | sort -u \
  | sort -t: -k1,1 -k2,2n -k3,3n >"$work/findings" || true
n=$(wc -l <"$work/findings")
if ((n)); then
  cat "$work/findings"
  echo
  echo "clang-tidy findings by check:"
  sed -E 's/.*\[([^],]+).*\]$/\1/' "$work/findings" | sort | uniq -c | sort -rn
fi
if [ -f "$work/failed" ]; then
  # clang-tidy failed on a file without a finding there (a crash, a bad compile command): why.
  while read -r f; do
    log=$work/$(echo "${f#$root/}" | tr / _).log
    grep -qE ': (warning|error): ' "$log" && continue
    echo "clang-tidy failed on $f:"
    tail -20 "$log"
    n=$((n + 1))
  done <"$work/failed"
fi
echo "tidy: $count files, $n findings, $((SECONDS - start)) s"
[ ! -f "$work/failed" ] && ((n == 0))
