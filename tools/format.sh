#!/usr/bin/env bash
# Formats the C++ and CUDA sources (.h .cpp .cu .cuh: the tracked ones and new files git does not
# ignore) with clang-format and the repository's .clang-format.
#   tools/format.sh                 rewrites the files that are not formatted
#   tools/format.sh --check         changes nothing: lists the files that would change, exit 1 if any
#   tools/format.sh [--check] FILE...   only these files
# CLANG_FORMAT names the binary (default clang-format; the style is written for clang-format 14,
# Debian 12's `clang-format` package, which tools/install_deps.sh --lint installs).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
case "${1:-}" in -*) echo "usage: $0 [--check] [FILE...]" >&2; exit 2 ;; esac
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null || { echo "$0: $CLANG_FORMAT not found (tools/install_deps.sh --lint)" >&2; exit 2; }
version=$("$CLANG_FORMAT" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "$version" = 14 ] || echo "$0: note: $CLANG_FORMAT is version $version; .clang-format is checked with 14" >&2

list=$(mktemp)
trap 'rm -f "$list" "$list.out"' EXIT
if (($#)); then
  printf '%s\0' "$@" >"$list"
elif git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Files deleted in the work tree but still in the index are left out.
  git ls-files -z --cached --others --exclude-standard -- '*.h' '*.cpp' '*.cu' '*.cuh' \
    | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | sort -zu >"$list"
else
  find include src kernels tests benchmarks -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) \
    -print0 2>/dev/null | sort -z >"$list"
fi
count=$(tr -cd '\0' <"$list" | wc -c)

# Each worker prints the names of the files that differ from clang-format's output (--check), or
# rewrites them in place and prints their names.
export CLANG_FORMAT check
failed=0
xargs -0 -r -n 8 -P"$(nproc)" bash -c '
  status=0
  tmp=$(mktemp)
  trap "rm -f $tmp" EXIT
  for f; do
    if ! "$CLANG_FORMAT" --style=file:"$PWD/.clang-format" "$f" >"$tmp"; then
      echo "$0: clang-format failed on $f" >&2
      status=1
    elif ! cmp -s "$tmp" "$f"; then
      echo "$f"
      ((check)) || "$CLANG_FORMAT" --style=file:"$PWD/.clang-format" -i "$f" || status=1
    fi
  done
  exit $status' "$0" <"$list" >"$list.out" || failed=1
sort -o "$list.out" "$list.out"
changed=$(wc -l <"$list.out")
if ((check)); then
  if ((changed)); then
    sed 's/^/  /' "$list.out"
    echo "format: $changed of $count files are not formatted as .clang-format says; run tools/format.sh" \
      "(or clang-format -i FILE) and look at the diff" >&2
    exit 1
  fi
  ((failed)) || echo "format: $count files checked, all formatted"
else
  sed 's/^/formatted /' "$list.out"
  echo "format: $changed of $count files rewritten"
fi
exit $((failed ? 2 : 0))
